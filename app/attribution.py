"""`POST /v1/attribution`: validate, run one phase through the service, dump the answer through its schema."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, g, jsonify, request
from marshmallow import ValidationError

from app.body import (
    has_duplicate_keys,
    parse_fast,
    parse_json_object,
    read_json_body,
    structure_marks,
    validation_error,
    within_bounds,
)
from app.mapping import response_json, to_request
from app.tracing import extract
from providers.base import Deadline
from schemas.fast import fast_load, object_keys, string_colons
from schemas.request import SCHEMA_VERSION, AttributionRequestSchema
from schemas.response import SERVICE_NAME

bp = Blueprint("attribution", __name__)

_request_schema = AttributionRequestSchema()


def _fast(raw: bytes, marks: bytes) -> dict[str, Any] | None:
    """The loaded request when the body (`marks`: its `structure_marks`) is certainly a valid one, read by orjson
    and checked in bulk; else None."""
    if not within_bounds(marks):
        return None
    payload = parse_fast(raw)
    if type(payload) is not dict:
        return None
    data = fast_load(payload)
    if data is None or has_duplicate_keys(raw, marks, object_keys(payload), string_colons(payload)):
        return None
    return data


def _load(raw: bytes) -> dict[str, Any]:
    """The request body loaded, or RequestValidationError with every problem (a 422).

    A body within the value bounds is parsed by orjson and a valid request checked in bulk (`_fast`); anything
    else (bad JSON, a duplicate key, too many values, any doubt about a value) is read by the strict reader and
    loaded through the schema, which reports it.
    """
    marks = structure_marks(raw)  # counted once, for the bounds of both readers
    data = _fast(raw, marks)
    if data is not None:
        return data
    payload = parse_json_object(raw, marks)
    data = fast_load(payload)  # a valid body orjson could not take (commas inside names past the value bound)
    if data is not None:
        return data
    try:
        return _request_schema.load(payload)
    except ValidationError as exc:
        raise validation_error(exc.messages) from None


@bp.post("/v1/attribution", provide_automatic_options=False)
def attribution():  # noqa: ANN201 - a Flask view
    req = request._get_current_object()  # type: ignore[attr-defined]
    ctx = g._get_current_object()  # one lookup each, not one a use
    attribution_request = to_request(_load(read_json_body(req)))
    ctx.phase = attribution_request.phase.value
    trace = extract(req.headers)
    if trace is not None:
        ctx.trace_id = trace.trace_id
    # The deadline counts from the request's arrival, not from the provider call.
    deadline = Deadline(ctx.started_monotonic + attribution_request.timeout_ms / 1000.0)
    adapter = current_app.extensions["attribution_adapter"]
    result = adapter.service.handle(attribution_request, deadline, trace)
    ctx.outcome = result.label
    adapter.metrics.observe_answer(
        ctx.phase, result.label, [finding.error_category for finding in result.outcome.attributions]
    )
    body = response_json(
        result.outcome,
        schema_version=SCHEMA_VERSION,
        service={"name": SERVICE_NAME, "version": adapter.version, "provider": adapter.provider_name},
        request_id=ctx.request_id,
        session_id=result.session_id,
    )
    return jsonify(body)

"""`POST /v1/attribution`: validate, run one phase through the service, dump the answer through its schema."""

from __future__ import annotations

from flask import Blueprint, current_app, g, jsonify, request

from app.body import load_request, read_json_body
from app.mapping import response_json, to_request
from app.tracing import extract
from providers.base import Deadline
from schemas.request import SCHEMA_VERSION
from schemas.response import SERVICE_NAME

bp = Blueprint("attribution", __name__)


@bp.post("/v1/attribution", provide_automatic_options=False)
def attribution():  # noqa: ANN201 - a Flask view
    req = request._get_current_object()  # type: ignore[attr-defined]
    ctx = g._get_current_object()  # one lookup each, not one a use
    attribution_request = to_request(load_request(read_json_body(req)))
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

"""`POST /v1/attribution`: validate, run one phase through the service, dump the answer through its schema."""

from __future__ import annotations

from flask import Blueprint, current_app, g, jsonify, request
from marshmallow import ValidationError

from app.body import read_json_object, validation_error
from app.mapping import response_data, to_request
from app.tracing import extract
from providers.base import Deadline
from schemas.request import SCHEMA_VERSION, AttributionRequestSchema
from schemas.response import SERVICE_NAME, AttributionResponseSchema

bp = Blueprint("attribution", __name__)

_request_schema = AttributionRequestSchema()
_response_schema = AttributionResponseSchema()


@bp.post("/v1/attribution", provide_automatic_options=False)
def attribution():  # noqa: ANN201 - a Flask view
    payload = read_json_object(request)
    try:
        data = _request_schema.load(payload)
    except ValidationError as exc:
        raise validation_error(exc.messages) from None
    attribution_request = to_request(data)
    g.phase = attribution_request.phase.value
    trace = extract(request.headers)
    if trace is not None:
        g.trace_id = trace.trace_id
    # The deadline counts from the request's arrival, not from the provider call.
    deadline = Deadline(g.started_monotonic + attribution_request.timeout_ms / 1000.0)
    adapter = current_app.extensions["attribution_adapter"]
    result = adapter.service.handle(attribution_request, deadline, trace)
    g.outcome = result.label
    adapter.metrics.observe_answer(
        g.phase, result.label, [finding.error_category for finding in result.outcome.attributions]
    )
    body = response_data(
        result.outcome,
        schema_version=SCHEMA_VERSION,
        service={"name": SERVICE_NAME, "version": adapter.version, "provider": adapter.provider_name},
        request_id=g.request_id,
        session_id=result.session_id,
    )
    return jsonify(_response_schema.dump(body))

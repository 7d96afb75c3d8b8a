"""`AttributionResponse`: its shape, the service identity, and agreement with the published OpenAPI document."""

from __future__ import annotations

import copy

import pytest

from app import __version__
from tests.contract.conftest import (
    NamedFakeProvider,
    check_200,
    echo_fast,
    empty_outcome,
    make_client,
    openapi_errors,
    post,
    valid_request,
)


def test_fast_answer_shape(client, provider):
    response = post(client, valid_request())
    body = check_200(response)
    assert set(body) == {
        "schema_version",
        "service",
        "request_id",
        "attribution_session_id",
        "attributions",
        "unattributed_targets",
    }
    assert body["schema_version"] == "0.1.0"
    assert body["service"] == {"name": "attribution-adapter", "version": __version__, "provider": "fake"}
    assert isinstance(body["attribution_session_id"], str) and body["attribution_session_id"]
    assert body["attributions"] == [
        {
            "target": {"type": "Node", "name": "worker-01"},
            "error_category": "gpu_hardware",
            "observed_at": "2026-09-09T12:00:00Z",
            "evidence": [{"source": "syslog", "message": "NVRM: Xid 79, GPU has fallen off the bus."}],
            "confidence": 0.9,
        }
    ]
    assert body["unattributed_targets"] == [
        {"type": "Node", "name": "worker-02"},
        {"type": "Node", "name": "worker-03"},
    ]
    assert "error" not in body
    assert response.headers["X-Request-ID"] == body["request_id"]


def test_service_provider_is_the_provider_name():
    provider = NamedFakeProvider("telemetry_test", fast=empty_outcome)
    body = check_200(post(make_client(provider), valid_request()))
    assert body["service"]["provider"] == "telemetry_test"


def test_empty_answer_is_a_normal_result(client):
    provider = NamedFakeProvider("fake", fast=empty_outcome)
    body = check_200(post(make_client(provider), valid_request()))
    assert body["attributions"] == [] and body["unattributed_targets"] == []
    assert "error" not in body
    assert body["attribution_session_id"]


def test_missing_confidence_stays_absent():
    from dataclasses import replace

    def no_confidence(request, *_):
        outcome = echo_fast(request)
        return replace(outcome, attributions=tuple(replace(f, confidence=None) for f in outcome.attributions))

    body = check_200(post(make_client(NamedFakeProvider("fake", fast=no_confidence)), valid_request()))
    assert "confidence" not in body["attributions"][0]


def test_all_job_resources_target_has_no_name():
    from providers.base import AllJobResources, AttributionOutcome, Finding

    def whole_job(request, *_):
        return AttributionOutcome(
            attributions=(Finding(AllJobResources(), "nccl_timeout", request.failure_context.detected_at),)
        )

    body = check_200(post(make_client(NamedFakeProvider("fake", fast=whole_job)), valid_request()))
    assert body["attributions"][0]["target"] == {"type": "AllJobResources"}
    assert body["attributions"][0]["evidence"] == []


# ---------------------------------------------------------------- the OpenAPI helper itself


GOOD = {
    "schema_version": "0.1.0",
    "service": {"name": "attribution-adapter", "version": "0.1.0", "provider": "fake"},
    "request_id": "abc",
    "attribution_session_id": None,
    "attributions": [
        {
            "target": {"type": "Node", "name": "n1"},
            "error_category": "gpu_hardware",
            "observed_at": "2026-09-09T12:00:00Z",
            "evidence": [],
        }
    ],
    "unattributed_targets": [{"type": "AllJobResources"}],
    "error": {"type": "insufficient_telemetry", "message": "too little telemetry"},
}


def _broken(path, value):
    body = copy.deepcopy(GOOD)
    node = body
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return body


def test_openapi_helper_accepts_a_valid_body_with_a_null_session():
    assert openapi_errors(GOOD) == []


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("schema_version",), "0.2.0"),
        (("request_id",), KeyError),
        (("attribution_session_id",), 5),
        (("error",), None),
        (("error", "type"), "fatal"),
        (("attributions", 0, "confidence"), 1.5),
        (("attributions", 0, "target"), {"type": "AllJobResources", "name": "n1"}),
        (("attributions", 0, "observed_at"), "yesterday"),
        (("attributions", 0, "error_category"), "GPU"),
        (("unattributed_targets", 0), {"type": "Node"}),
        (("service", "extra"), "x"),
    ],
)
def test_openapi_helper_rejects_what_the_document_forbids(path, value):
    assert openapi_errors(_broken(path, value)) != []

"""The FACT provider behind the Flask app: what ADI sees for fast, slow across instances, and every error."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import ModuleType
from typing import Any

import pytest
from flask import Flask

from app import create_app
from app.settings import Settings
from providers import load_provider
from providers.fact import FactProvider
from tests.fact.support import NODES, OPTIONS, TRACEPARENT, body

T0 = datetime(2026, 9, 9, 11, 58, tzinfo=timezone.utc)


def fact_app(provider: FactProvider | None = None) -> Flask:
    return create_app(
        Settings(provider="fact", options=OPTIONS), provider=provider or FactProvider.from_options(OPTIONS)
    )


def post(app: Flask, data: dict[str, Any], **headers: str) -> dict[str, Any]:
    response = app.test_client().post("/v1/attribution", json=data, headers=headers)
    assert response.status_code == 200
    return response.get_json()


def xid_on(fake: ModuleType, node: str, attributor_id: str = "attr-7") -> object:
    symptoms = [
        fake.Symptom("GPU Xid", "NVRM: Xid 79, GPU has fallen off the bus", T0 + timedelta(seconds=30)),
        fake.Symptom("ECC", "uncorrectable ECC error", T0),
    ]
    return fake.Attribution(attributor_id, faulty_nodes=[fake.Verdict(node, symptoms)], analysed_nodes=list(NODES))


def test_fast_answer_through_the_app(fake: ModuleType) -> None:
    fake.ANSWERS["start"].append(xid_on(fake, "worker-02"))
    answer = post(fact_app(), body(), traceparent=TRACEPARENT)
    assert answer["service"]["provider"] == "fact"
    assert answer["attribution_session_id"]
    assert answer["attributions"] == [
        {
            "target": {"type": "Node", "name": "worker-02"},
            "error_category": "ecc",
            "observed_at": "2026-09-09T11:58:00Z",
            "evidence": [
                {"source": "fact", "message": "uncorrectable ECC error", "observed_at": "2026-09-09T11:58:00Z"},
                {
                    "source": "fact",
                    "message": "NVRM: Xid 79, GPU has fallen off the bus",
                    "observed_at": "2026-09-09T11:58:30Z",
                },
            ],
        }
    ]
    assert answer["unattributed_targets"] == [
        {"type": "Node", "name": "worker-01"},
        {"type": "Node", "name": "worker-03"},
    ]
    assert "error" not in answer
    [(_, arguments)] = fake.CALLS
    assert arguments["headers"] == {"traceparent": TRACEPARENT}
    assert 0 < arguments["timeout"] <= 10.0


def test_job_level_verdict_through_the_app(fake: ModuleType) -> None:
    job = fake.Verdict(None, [fake.Symptom("NCCL/timeout", "collective timed out on all ranks", T0)], probability=0.6)
    fake.ANSWERS["start"].append(fake.Attribution("a", analysed_nodes=list(NODES), job_verdict=job))
    [finding] = post(fact_app(), body())["attributions"]
    assert finding["target"] == {"type": "AllJobResources"}
    assert (finding["error_category"], finding["confidence"]) == ("nccl_timeout", 0.6)


def test_slow_continues_the_fast_session_on_another_app_instance(fake: ModuleType) -> None:
    fake.ANSWERS["start"].append(fake.Attribution("attr-7", analysed_nodes=list(NODES)))
    session = post(fact_app(), body())["attribution_session_id"]

    # Another worker or replica: a new provider, a new client, a new app; only the session id travels.
    fake.ANSWERS["continue"].append(xid_on(fake, "worker-03", "attr-7"))
    answer = post(fact_app(), body("slow", session=session, window=True))
    assert len(fake.CLIENTS) == 2
    (_, _), (call, arguments) = fake.CALLS
    assert call == "continue"
    assert arguments["attributor_id"] == "attr-7"
    assert (arguments["start_time"], arguments["end_time"]) == (
        datetime(2026, 9, 9, 12, 5, tzinfo=timezone.utc),
        datetime(2026, 9, 9, 12, 20, tzinfo=timezone.utc),
    )
    assert answer["attribution_session_id"] == session
    assert [f["target"] for f in answer["attributions"]] == [{"type": "Node", "name": "worker-03"}]
    assert "error" not in answer


def test_slow_without_window_never_reaches_fact(fake: ModuleType) -> None:
    fake.ANSWERS["start"].append(fake.Attribution("attr-7", analysed_nodes=list(NODES)))
    app = fact_app()
    session = post(app, body())["attribution_session_id"]
    answer = post(app, body("slow", session=session))
    assert answer["error"]["type"] == "no_attribution_available"
    assert [call for call, _ in fake.CALLS] == ["start"]


def test_insufficient_telemetry_stands_beside_findings(fake: ModuleType) -> None:
    result = xid_on(fake, "worker-01")
    result.insufficient_telemetry = True
    fake.ANSWERS["start"].append(result)
    answer = post(fact_app(), body())
    assert answer["error"]["type"] == "insufficient_telemetry"
    assert [f["target"]["name"] for f in answer["attributions"]] == ["worker-01"]


def test_node_outside_scope_is_a_service_error_with_nothing_passed_through(fake: ModuleType) -> None:
    result = xid_on(fake, "worker-01")
    result.faulty_nodes.append(fake.Verdict("worker-99", [fake.Symptom("xid", "m", T0)]))
    fake.ANSWERS["start"].append(result)
    answer = post(fact_app(), body())
    assert answer["error"] == {"type": "service_error", "message": "FACT named a node outside the request's scope"}
    assert answer["attributions"] == [] and answer["unattributed_targets"] == []


@pytest.mark.parametrize(
    "scripted, kind, message",
    [
        ("timeout", "timeout", "FACT did not answer in time"),
        ("exception", "service_error", "FACT failed while attributing the failure"),
        ("unreadable", "service_error", "FACT answered with an unreadable result"),
    ],
)
def test_client_failures_are_typed_errors(fake: ModuleType, scripted: str, kind: str, message: str) -> None:
    answers = {
        "timeout": fake.TimeoutError("deadline exceeded after 10s"),
        "exception": RuntimeError("Authorization: Bearer s3cr3t; dmesg: Xid 79 on worker-01"),
        "unreadable": fake.Attribution("a", faulty_nodes=[{"node": "worker-01"}]),
    }
    fake.ANSWERS["start"].append(answers[scripted])
    response = fact_app().test_client().post("/v1/attribution", json=body())
    assert response.status_code == 200
    answer = response.get_json()
    assert answer["error"] == {"type": kind, "message": message}
    assert answer["attributions"] == [] and answer["unattributed_targets"] == []
    assert b"s3cr3t" not in response.data and b"Xid" not in response.data


def test_registry_built_provider_serves_the_app(fake: ModuleType) -> None:
    fake.ANSWERS["start"].append(xid_on(fake, "worker-02"))
    provider = load_provider("fact", OPTIONS)
    answer = post(create_app(Settings(provider="fact", options=OPTIONS), provider=provider), body())
    assert [f["target"]["name"] for f in answer["attributions"]] == ["worker-02"]


def test_app_built_from_settings_alone_constructs_the_fact_provider(fake: ModuleType) -> None:
    fake.ANSWERS["start"].append(xid_on(fake, "worker-01"))
    answer = post(create_app(Settings(provider="fact", options=OPTIONS)), body())
    assert answer["service"]["provider"] == "fact"
    assert [f["target"]["name"] for f in answer["attributions"]] == ["worker-01"]
    assert len(fake.CLIENTS) == 1

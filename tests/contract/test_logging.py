"""docs/contract.md, "Caller and network requirements": logs keep out bodies, evidence text and user IDs by default
(the default level is `info`)."""

from __future__ import annotations

import logging

from providers.base import AttributionOutcome, Evidence, Finding, NodeTarget, ProviderProcessingError
from tests.contract.conftest import NamedFakeProvider, check_200, make_client, post, slow_request, valid_request

USER_ID = "user-jdoe-4711"
NODE = "gpu-node-secret-17"
EVIDENCE = "NVRM Xid 79 on bus 0000:07:00 seen by jdoe"
WORKFLOW = "workflow-of-jdoe"


def test_logs_keep_out_bodies_evidence_and_user_ids(caplog):
    def fast(request, *_):
        return AttributionOutcome(
            attributions=(
                Finding(
                    NodeTarget(NODE),
                    "gpu_hardware",
                    request.failure_context.detected_at,
                    (Evidence("syslog", EVIDENCE),),
                ),
            ),
            session_state={"user": USER_ID},
        )

    def slow(request, *_):
        raise ProviderProcessingError("processing failed")

    caplog.set_level(logging.INFO)
    client = make_client(NamedFakeProvider("fake", fast=fast, slow=slow))
    body = valid_request(workload_id=USER_ID, workload_context={"workflow_id": WORKFLOW, "attempt_index": 0})
    body["scope"]["nodes"] = [NODE]
    session_id = check_200(post(client, body))["attribution_session_id"]
    check_200(post(client, slow_request(session_id, workload_id=USER_ID, workload_context=body["workload_context"])))
    post(client, {**body, "workload_id": f" {USER_ID}"})  # a 422 that quotes nothing of the body in logs
    post(client, {**body, "phase": "slow", "continue_session": "garbage"})

    logged = "\n".join(record.getMessage() for record in caplog.records)
    for secret in (USER_ID, NODE, EVIDENCE, WORKFLOW, session_id):
        assert secret not in logged, f"{secret!r} was logged:\n{logged}"


def test_lines_written_while_a_request_is_served_carry_its_id_also_from_the_provider_s_thread():
    import io
    import json
    import threading

    from app.logs import JsonFormatter, RequestIdFilter

    provider_log = logging.getLogger("attribution_adapter.providers.scripted")
    threads: list[str] = []

    def fast(request, *_):
        threads.append(threading.current_thread().name)
        provider_log.warning("telemetry file %s could not be read; skipped", "host-a/kern.log")
        raise ProviderProcessingError("processing failed")

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RequestIdFilter())
    logger = logging.getLogger("attribution_adapter")
    logger.addHandler(handler)
    try:
        client = make_client(NamedFakeProvider("fake", fast=fast))
        ids = [check_200(post(client, valid_request()))["request_id"] for _ in range(2)]
        provider_log.warning("outside any request")
    finally:
        logger.removeHandler(handler)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert threads and all(name.startswith("provider-call") for name in threads)
    warned = [line for line in lines if line["logger"] == "attribution_adapter.providers.scripted"]
    assert [line.get("request_id") for line in warned] == [*ids, None]
    assert "host-a/kern.log" in warned[0]["message"]
    service = [line for line in lines if line["logger"] == "attribution_adapter.service"]
    assert [line["request_id"] for line in service] == ids

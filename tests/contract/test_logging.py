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

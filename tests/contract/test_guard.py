"""The contract guard (docs/contract.md, "Invariants the service enforces on every response"): whatever the provider
returns, the caller gets a contract-valid answer; an answer that breaks the contract becomes `service_error`
and nothing of it passes through."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest

from providers.base import (
    AllJobResources,
    AttributionOutcome,
    ErrorType,
    Evidence,
    Finding,
    NodeTarget,
    ProviderError,
)
from tests.contract.conftest import (
    NamedFakeProvider,
    check_200,
    check_empty_error,
    echo_fast,
    make_client,
    post,
    slow_request,
    valid_request,
)

NODES = ("worker-01", "worker-02", "worker-03")  # scope.nodes of valid_request()
AT = datetime(2026, 9, 9, 12, 0, tzinfo=timezone.utc)
NAIVE = datetime(2026, 9, 9, 12, 0)
IST = timezone(timedelta(hours=5, minutes=30))


def finding(node="worker-01", **changes):
    values = {
        "target": NodeTarget(node),
        "error_category": "gpu_hardware",
        "observed_at": AT,
        "evidence": (Evidence("syslog", "Xid 79"),),
        "confidence": 0.8,
    }
    values.update(changes)
    return Finding(**values)


def outcome(*findings, unattributed=(), error=None):
    return AttributionOutcome(attributions=tuple(findings), unattributed_targets=tuple(unattributed), error=error)


def _ask(answer, phase="fast"):
    """The response to a `phase` request whose provider answers `answer` (a value, not a callable)."""

    def behaviour(*_):
        return answer

    if phase == "fast":
        provider = NamedFakeProvider("fake", fast=behaviour)
        client = make_client(provider)
        response = post(client, valid_request())
    else:
        provider = NamedFakeProvider("fake", fast=echo_fast, slow=behaviour)
        client = make_client(provider)
        session_id = check_200(post(client, valid_request()))["attribution_session_id"]
        response = post(client, slow_request(session_id))
    assert [c[0] for c in provider.calls][-1] == phase
    return response


VIOLATIONS = {
    # targets and scope
    "finding-node-outside-scope": outcome(finding("worker-99")),
    "finding-node-case-differs": outcome(finding("Worker-01")),
    "unattributed-node-outside-scope": outcome(finding(), unattributed=[NodeTarget("worker-99")]),
    "node-in-both-lists": outcome(finding("worker-01"), unattributed=[NodeTarget("worker-01")]),
    "node-in-both-lists-among-others": outcome(
        finding("worker-02"), unattributed=[NodeTarget("worker-01"), NodeTarget("worker-02")]
    ),
    "unattributed-node-repeated": outcome(unattributed=[NodeTarget("worker-01"), NodeTarget("worker-01")]),
    "unattributed-job-resources-repeated": outcome(unattributed=[AllJobResources(), AllJobResources()]),
    "job-resources-in-both-lists": outcome(
        finding(target=AllJobResources()), unattributed=[NodeTarget("worker-02"), AllJobResources()]
    ),
    "target-not-a-target": outcome(finding(target="worker-01")),
    "unattributed-not-a-target": outcome(unattributed=["worker-02"]),
    # findings beside a blocking error
    "findings-beside-timeout": outcome(finding(), error=ProviderError(ErrorType.TIMEOUT, "late")),
    "findings-beside-service_error": outcome(finding(), error=ProviderError(ErrorType.SERVICE_ERROR, "bad")),
    "findings-beside-no_attribution_available": outcome(
        finding(), unattributed=[NodeTarget("worker-02")], error=ProviderError(ErrorType.NO_ATTRIBUTION_AVAILABLE, "x")
    ),
    "error-type-not-public": outcome(error=ProviderError("fatal", "x")),
    "error-type-plain-string": outcome(error=ProviderError("timeout", "x")),
    "error-not-a-provider-error": outcome(error="timeout"),
    "error-message-not-a-string": outcome(error=ProviderError(ErrorType.INSUFFICIENT_TELEMETRY, None)),
    # evidence
    "33-evidence-items": outcome(finding(evidence=tuple(Evidence("syslog", f"line {i}") for i in range(33)))),
    "evidence-not-evidence": outcome(finding(evidence=("Xid 79",))),
    "evidence-not-a-sequence": outcome(finding(evidence=None)),
    "evidence-source-not-a-token": outcome(finding(evidence=(Evidence("SysLog", "x"),))),
    "evidence-message-not-a-string": outcome(finding(evidence=(Evidence("syslog", b"bytes"),))),
    "evidence-naive-datetime": outcome(finding(evidence=(Evidence("syslog", "x", NAIVE),))),
    "evidence-observed_at-a-string": outcome(finding(evidence=(Evidence("syslog", "x", "2026-09-09T12:00:00Z"),))),
    # error_category
    "category-upper": outcome(finding(error_category="GPU")),
    "category-empty": outcome(finding(error_category="")),
    "category-hyphen": outcome(finding(error_category="gpu-hardware")),
    "category-trailing-newline": outcome(finding(error_category="gpu_hardware\n")),
    "category-65-chars": outcome(finding(error_category="g" * 65)),
    "category-none": outcome(finding(error_category=None)),
    # observed_at
    "observed_at-naive": outcome(finding(observed_at=NAIVE)),
    "observed_at-string": outcome(finding(observed_at="2026-09-09T12:00:00Z")),
    "observed_at-none": outcome(finding(observed_at=None)),
    "observed_at-out-of-utc-range-high": outcome(
        finding(observed_at=datetime(9999, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-5))))
    ),
    "observed_at-out-of-utc-range-low": outcome(finding(observed_at=datetime(1, 1, 1, 1, 0, tzinfo=IST))),
    # confidence
    "confidence-negative": outcome(finding(confidence=-0.01)),
    "confidence-above-1": outcome(finding(confidence=1.01)),
    "confidence-NaN": outcome(finding(confidence=math.nan)),
    "confidence-inf": outcome(finding(confidence=math.inf)),
    "confidence-bool": outcome(finding(confidence=True)),
    "confidence-string": outcome(finding(confidence="0.5")),
    # the return value itself
    "return-none": None,
    "return-dict": {"attributions": [], "unattributed_targets": []},
    "return-list": [finding()],
    "return-finding": finding(),
    "return-string": "ok",
    "attributions-none": AttributionOutcome(attributions=None),
    "unattributed-none": AttributionOutcome(unattributed_targets=None),
    "attribution-not-a-finding": outcome({"target": {"type": "Node", "name": "worker-01"}}),
}


@pytest.mark.parametrize("phase", ["fast", "slow"])
@pytest.mark.parametrize("case", list(VIOLATIONS))
def test_contract_breaking_answer_becomes_service_error_with_nothing_passed_through(case, phase):
    body = check_empty_error(_ask(VIOLATIONS[case], phase), "service_error")
    assert body["error"]["message"]
    if phase == "slow":
        assert isinstance(body["attribution_session_id"], str)


# ---------------------------------------------------------------- answers that stand


def test_findings_beside_insufficient_telemetry_pass():
    answer = outcome(
        finding("worker-01"),
        unattributed=[NodeTarget("worker-02")],
        error=ProviderError(ErrorType.INSUFFICIENT_TELEMETRY, "no kernel log for worker-03"),
    )
    body = check_200(_ask(answer))
    assert [f["target"] for f in body["attributions"]] == [{"type": "Node", "name": "worker-01"}]
    assert body["unattributed_targets"] == [{"type": "Node", "name": "worker-02"}]
    assert body["error"] == {"type": "insufficient_telemetry", "message": "no kernel log for worker-03"}


@pytest.mark.parametrize("error_type", [ErrorType.TIMEOUT, ErrorType.SERVICE_ERROR, ErrorType.NO_ATTRIBUTION_AVAILABLE])
def test_blocking_error_without_findings_passes(error_type):
    body = check_empty_error(_ask(outcome(error=ProviderError(error_type, "nothing to say"))), error_type.value)
    assert body["error"]["message"] == "nothing to say"


def test_32_evidence_items_pass():
    evidence = tuple(Evidence("syslog", f"line {i}") for i in range(32))
    body = check_200(_ask(outcome(finding(evidence=evidence))))
    assert [e["message"] for e in body["attributions"][0]["evidence"]] == [f"line {i}" for i in range(32)]


@pytest.mark.parametrize("confidence", [0, 0.0, 0.5, 1, 1.0])
def test_confidence_in_0_to_1_passes(confidence):
    body = check_200(_ask(outcome(finding(confidence=confidence))))
    assert body["attributions"][0]["confidence"] == confidence


def test_all_job_resources_and_nodes_may_mix():
    answer = outcome(finding(target=AllJobResources()), unattributed=[NodeTarget(n) for n in NODES])
    body = check_200(_ask(answer))
    assert body["attributions"][0]["target"] == {"type": "AllJobResources"}
    assert len(body["unattributed_targets"]) == 3


def test_all_job_resources_may_stand_once_among_unattributed_nodes():
    answer = outcome(finding("worker-01"), unattributed=[NodeTarget("worker-02"), AllJobResources()])
    body = check_200(_ask(answer))
    assert "error" not in body
    assert body["unattributed_targets"] == [{"name": "worker-02", "type": "Node"}, {"type": "AllJobResources"}]


def test_aware_datetimes_are_emitted_in_utc_with_z():
    answer = outcome(
        finding(
            observed_at=datetime(2026, 9, 9, 17, 30, tzinfo=IST),
            evidence=(Evidence("syslog", "x", datetime(2026, 9, 9, 5, 0, tzinfo=timezone(timedelta(hours=-7)))),),
        )
    )
    found = check_200(_ask(answer))["attributions"][0]
    assert found["observed_at"] == "2026-09-09T12:00:00Z"
    assert found["evidence"][0]["observed_at"] == "2026-09-09T12:00:00Z"


@pytest.mark.parametrize(
    ("length", "char"),
    [(4096, "a"), (4097, "a"), (10000, "a"), (5000, "\U0001f600"), (4097, "\u00e9")],
)
def test_evidence_message_is_cut_to_4096_ending_in_ellipsis(length, char):
    text = char * length
    message = check_200(_ask(outcome(finding(evidence=(Evidence("syslog", text),)))))["attributions"][0]["evidence"][0][
        "message"
    ]
    assert len(message) <= 4096
    if length <= 4096:
        assert message == text
    else:
        assert len(message) == 4096
        assert message.endswith("\u2026")
        assert message[:-1] == text[:4095]


@pytest.mark.parametrize(
    "text",
    [
        "telemetry missing\nTraceback (most recent call last):\n  File x",
        "telemetry missing\r\nsecond line",
        "\n\ntelemetry missing\n",
        "telemetry missing" + " and more" * 200,
    ],
    ids=["multi-line", "crlf", "leading-blank-lines", "overlong"],
)
def test_provider_error_message_is_reduced_to_one_short_line(text):
    answer = outcome(finding(), error=ProviderError(ErrorType.INSUFFICIENT_TELEMETRY, text))
    body = check_200(_ask(answer))
    message = body["error"]["message"]
    assert message.startswith("telemetry missing")
    assert "\n" not in message and "\r" not in message
    assert len(message) <= 512
    assert "Traceback" not in message
    assert len(body["attributions"]) == 1


def test_provider_error_with_an_empty_message_gets_one():
    body = check_200(_ask(outcome(error=ProviderError(ErrorType.INSUFFICIENT_TELEMETRY, ""))))
    assert body["error"]["type"] == "insufficient_telemetry" and body["error"]["message"].strip()


class _Shifting(Evidence):
    """Evidence whose message is computed at every read: a short text for the first reads, then a long one."""

    reads = 0

    @property  # type: ignore[override]
    def message(self) -> str:
        type(self).reads += 1
        return "short text" if type(self).reads <= 3 else "y" * 5000

    @message.setter
    def message(self, _: str) -> None:
        pass


def test_an_evidence_subclass_computing_its_fields_is_passed_as_plain_evidence_with_the_checked_value():
    # The guard passes on a provider's own object only when it is of the exact frozen type: a subclass could give
    # a value other than the one checked when the answer is written.
    _Shifting.reads = 0
    body = check_200(_ask(outcome(finding(evidence=(_Shifting("syslog", "ignored"),)))))
    assert body["attributions"][0]["evidence"][0]["message"] == "short text"

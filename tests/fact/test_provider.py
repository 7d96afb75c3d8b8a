"""FactProvider.fast and .slow called directly: the call to FACT, the translation of its result, every error."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from types import ModuleType

import pytest

from providers.base import (
    AllJobResources,
    Deadline,
    ErrorType,
    Evidence,
    NodeTarget,
    Phase,
    ProviderProcessingError,
    ProviderTimeoutError,
    TraceContext,
)
from providers.fact import FactProvider
from tests.fact.support import DETECTED_AT, NODES, OPTIONS, TRACEPARENT, WINDOW, request

T0 = datetime(2026, 9, 9, 11, 58, tzinfo=timezone.utc)
CEST = timezone(timedelta(hours=2))


def deadline(seconds: float = 10.0) -> Deadline:
    return Deadline(time.monotonic() + seconds)


@pytest.fixture
def provider(fake: ModuleType) -> FactProvider:
    return FactProvider.from_options(OPTIONS)


def symptom(fake: ModuleType, category: str, minute: int, message: str = "") -> object:
    return fake.Symptom(category, message or f"{category} at {minute}", T0 + timedelta(minutes=minute))


# ---------------------------------------------------------------- fast: the call


def test_fast_sends_the_request_trace_and_remaining_time(fake: ModuleType, provider: FactProvider) -> None:
    fake.ANSWERS["start"].append(fake.Attribution("attr-1", analysed_nodes=list(NODES)))
    trace = TraceContext(TRACEPARENT, "vendor=x")
    provider.fast(request(), deadline(10.0), trace)
    [(call, arguments)] = fake.CALLS
    assert call == "start"
    timeout = arguments.pop("timeout")
    assert isinstance(timeout, float) and 9.0 < timeout <= 10.0
    assert arguments == {
        "workload_id": "12345",
        "nodes": list(NODES),
        "ranks": [0, 1, 7],
        "detected_at": DETECTED_AT,
        "detection_signal": "application_error",
        "headers": {"traceparent": TRACEPARENT, "tracestate": "vendor=x"},
    }


def test_fast_without_trace_sends_no_headers(fake: ModuleType, provider: FactProvider) -> None:
    fake.ANSWERS["start"].append(fake.Attribution("attr-1", analysed_nodes=list(NODES)))
    provider.fast(request(), deadline(), None)
    assert fake.CALLS[0][1]["headers"] == {}


# ---------------------------------------------------------------- fast: the translation


def test_fast_translates_a_faulty_node_field_by_field(fake: ModuleType, provider: FactProvider) -> None:
    late = fake.Symptom("NVLink", "NVLink error on link 3", datetime(2026, 9, 9, 13, 59, tzinfo=CEST))
    early = fake.Symptom("GPU Xid-79", "GPU has fallen off the bus", datetime(2026, 9, 9, 13, 57, 30, tzinfo=CEST))
    fake.ANSWERS["start"].append(
        fake.Attribution(
            "attr-42",
            faulty_nodes=[fake.Verdict("worker-02", [late, early])],
            analysed_nodes=["worker-03", "worker-02", "worker-01"],
        )
    )
    outcome = provider.fast(request(), deadline(), None)
    [finding] = outcome.attributions
    assert finding.target == NodeTarget("worker-02")
    assert finding.error_category == "gpu_xid_79"  # the earliest symptom's category
    assert finding.observed_at == datetime(2026, 9, 9, 11, 57, 30, tzinfo=timezone.utc)
    assert finding.observed_at.utcoffset() == timedelta(0)
    assert finding.evidence == (
        Evidence("fact", "GPU has fallen off the bus", datetime(2026, 9, 9, 11, 57, 30, tzinfo=timezone.utc)),
        Evidence("fact", "NVLink error on link 3", datetime(2026, 9, 9, 11, 59, tzinfo=timezone.utc)),
    )
    assert finding.confidence is None  # FACT gave no probability: none is invented
    assert outcome.unattributed_targets == (NodeTarget("worker-01"), NodeTarget("worker-03"))  # scope order
    assert outcome.error is None
    assert outcome.session_state == {"attributor_id": "attr-42"}


def test_fact_probability_becomes_confidence(fake: ModuleType, provider: FactProvider) -> None:
    verdict = fake.Verdict("worker-01", [symptom(fake, "ecc", 1)], probability=0.85)
    fake.ANSWERS["start"].append(fake.Attribution("a", faulty_nodes=[verdict], analysed_nodes=["worker-01"]))
    assert provider.fast(request(), deadline(), None).attributions[0].confidence == 0.85


def test_job_level_verdict_targets_all_job_resources(fake: ModuleType, provider: FactProvider) -> None:
    job = fake.Verdict(None, [symptom(fake, "NCCL timeout", 3, "allreduce stalled on every rank")])
    fake.ANSWERS["start"].append(fake.Attribution("a", analysed_nodes=list(NODES), job_verdict=job))
    outcome = provider.fast(request(), deadline(), None)
    [finding] = outcome.attributions
    assert finding.target == AllJobResources()
    assert finding.error_category == "nccl_timeout"
    assert finding.observed_at == T0 + timedelta(minutes=3)
    assert finding.evidence == (Evidence("fact", "allreduce stalled on every rank", T0 + timedelta(minutes=3)),)
    assert outcome.unattributed_targets == tuple(NodeTarget(n) for n in NODES)


def test_verdict_without_symptoms_is_unknown_at_detection_time(fake: ModuleType, provider: FactProvider) -> None:
    fake.ANSWERS["start"].append(
        fake.Attribution("a", faulty_nodes=[fake.Verdict("worker-03")], job_verdict=fake.Verdict(None))
    )
    outcome = provider.fast(request(), deadline(), None)
    assert [(f.target, f.error_category, f.observed_at, f.evidence) for f in outcome.attributions] == [
        (NodeTarget("worker-03"), "unknown", DETECTED_AT, ()),
        (AllJobResources(), "unknown", DETECTED_AT, ()),
    ]


@pytest.mark.parametrize(
    "categories, token",
    [
        (["GPU Xid"], "gpu_xid"),
        (["  ECC::DBE  "], "ecc_dbe"),
        (["79", "nvlink"], "nvlink"),  # a token starts with a letter: the next category is used
        ([""], "unknown"),
        (["💥"], "unknown"),
        (["x" * 100], "x" * 64),
        (["a" * 63 + " b"], "a" * 63),  # cut at 64 never leaves a trailing underscore
    ],
)
def test_category_is_normalised_to_a_token(
    fake: ModuleType, provider: FactProvider, categories: list[str], token: str
) -> None:
    symptoms = [symptom(fake, category, minute) for minute, category in enumerate(categories)]
    fake.ANSWERS["start"].append(fake.Attribution("a", faulty_nodes=[fake.Verdict("worker-01", symptoms)]))
    assert provider.fast(request(), deadline(), None).attributions[0].error_category == token


def test_evidence_is_bounded_by_max_evidence_earliest_first(fake: ModuleType) -> None:
    provider = FactProvider.from_options({**OPTIONS, "ATTRIBUTION_FACT_MAX_EVIDENCE": "2"})
    symptoms = [symptom(fake, "xid", minute) for minute in (5, 1, 3)]
    fake.ANSWERS["start"].append(fake.Attribution("a", faulty_nodes=[fake.Verdict("worker-01", symptoms)]))
    [finding] = provider.fast(request(), deadline(), None).attributions
    assert [e.observed_at for e in finding.evidence] == [T0 + timedelta(minutes=1), T0 + timedelta(minutes=3)]
    assert finding.observed_at == T0 + timedelta(minutes=1)


def test_max_evidence_zero_keeps_findings_without_evidence(fake: ModuleType) -> None:
    provider = FactProvider.from_options({**OPTIONS, "ATTRIBUTION_FACT_MAX_EVIDENCE": "0"})
    fake.ANSWERS["start"].append(
        fake.Attribution("a", faulty_nodes=[fake.Verdict("worker-01", [symptom(fake, "x", 1)])])
    )
    [finding] = provider.fast(request(), deadline(), None).attributions
    assert (finding.error_category, finding.evidence) == ("x", ())


def test_long_symptom_message_is_cut_with_an_ellipsis(fake: ModuleType, provider: FactProvider) -> None:
    verdict = fake.Verdict("worker-01", [symptom(fake, "xid", 1, "m" * 5000)])
    fake.ANSWERS["start"].append(fake.Attribution("a", faulty_nodes=[verdict]))
    message = provider.fast(request(), deadline(), None).attributions[0].evidence[0].message
    assert len(message) == 4096 and message.endswith("…")


def test_a_node_named_twice_gives_one_finding_with_all_symptoms(fake: ModuleType, provider: FactProvider) -> None:
    first = fake.Verdict("worker-02", [symptom(fake, "nvlink", 4)], probability=0.4)
    second = fake.Verdict("worker-02", [symptom(fake, "xid", 2)], probability=0.7)
    fake.ANSWERS["start"].append(fake.Attribution("a", faulty_nodes=[first, second], analysed_nodes=["worker-02"]))
    [finding] = provider.fast(request(), deadline(), None).attributions
    assert finding.error_category == "xid"
    assert [e.message for e in finding.evidence] == ["xid at 2", "nvlink at 4"]
    assert finding.confidence == 0.7


def test_healthy_nodes_outside_scope_are_left_out(fake: ModuleType, provider: FactProvider) -> None:
    fake.ANSWERS["start"].append(fake.Attribution("a", analysed_nodes=["worker-01", "worker-99"]))
    outcome = provider.fast(request(), deadline(), None)
    assert outcome.unattributed_targets == (NodeTarget("worker-01"),)
    assert outcome.error is None


def test_insufficient_telemetry_flag_stands_beside_findings(fake: ModuleType, provider: FactProvider) -> None:
    verdict = fake.Verdict("worker-01", [symptom(fake, "xid", 1)])
    fake.ANSWERS["start"].append(
        fake.Attribution("a", faulty_nodes=[verdict], analysed_nodes=["worker-01"], insufficient_telemetry=True)
    )
    outcome = provider.fast(request(), deadline(), None)
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY
    assert [f.target for f in outcome.attributions] == [NodeTarget("worker-01")]


def test_nothing_analysed_is_insufficient_telemetry(fake: ModuleType, provider: FactProvider) -> None:
    fake.ANSWERS["start"].append(fake.Attribution("a"))
    outcome = provider.fast(request(), deadline(), None)
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY
    assert outcome.attributions == () and outcome.unattributed_targets == ()
    assert outcome.session_state == {"attributor_id": "a"}


# ---------------------------------------------------------------- fast: errors


def test_faulty_node_outside_scope_breaks_the_answer(fake: ModuleType, provider: FactProvider) -> None:
    inside = fake.Verdict("worker-01", [symptom(fake, "xid", 1)])
    outside = fake.Verdict("worker-99", [symptom(fake, "xid", 1)])
    fake.ANSWERS["start"].append(fake.Attribution("a", faulty_nodes=[inside, outside]))
    with pytest.raises(ProviderProcessingError) as raised:
        provider.fast(request(), deadline(), None)
    assert str(raised.value) == "FACT named a node outside the request's scope"
    assert not isinstance(raised.value, ProviderTimeoutError)


@pytest.mark.parametrize("timeout", ["fake", "builtin"])
def test_client_timeout_is_a_provider_timeout(fake: ModuleType, provider: FactProvider, timeout: str) -> None:
    error = fake.TimeoutError("read timed out") if timeout == "fake" else TimeoutError("timed out")
    fake.ANSWERS["start"].append(error)
    with pytest.raises(ProviderTimeoutError, match="^FACT did not answer in time$"):
        provider.fast(request(), deadline(), None)


def test_expired_deadline_does_not_call_fact(fake: ModuleType, provider: FactProvider) -> None:
    with pytest.raises(ProviderTimeoutError):
        provider.fast(request(), Deadline(time.monotonic() - 1), None)
    assert fake.CALLS == []


def test_client_exception_is_a_processing_error_without_its_text(fake: ModuleType, provider: FactProvider) -> None:
    fake.ANSWERS["start"].append(ConnectionError("POST https://adi:tok3n@fact failed: kernel: Xid 79 on gpu0"))
    with pytest.raises(ProviderProcessingError) as raised:
        provider.fast(request(), deadline(), None)
    assert not isinstance(raised.value, ProviderTimeoutError)
    assert str(raised.value) == "FACT failed while attributing the failure"
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def _unreadable(fake: ModuleType) -> list[object]:
    good = fake.Symptom("xid", "m", T0)

    def attribution(**changes: object) -> object:
        base = fake.Attribution("a", faulty_nodes=[fake.Verdict("worker-01", [good])], analysed_nodes=["worker-01"])
        for name, value in changes.items():
            setattr(base, name, value)
        return base

    class NoJobVerdict:
        attributor_id, faulty_nodes, analysed_nodes, insufficient_telemetry = "a", [], [], False

    return [
        None,
        {"attributor_id": "a"},
        NoJobVerdict(),
        attribution(attributor_id=7),
        attribution(attributor_id=""),
        attribution(attributor_id="id\nwith newline"),
        attribution(attributor_id="x" * 201),
        attribution(attributor_id="é"),
        attribution(faulty_nodes="worker-01"),
        attribution(faulty_nodes=[fake.Verdict(None, [good])]),
        attribution(faulty_nodes=[fake.Verdict("worker-01", [fake.Symptom("xid", "m", T0.replace(tzinfo=None))])]),
        attribution(faulty_nodes=[fake.Verdict("worker-01", [fake.Symptom("xid", b"m", T0)])]),
        attribution(faulty_nodes=[fake.Verdict("worker-01", [fake.Symptom(None, "m", T0)])]),
        attribution(faulty_nodes=[fake.Verdict("worker-01", [fake.Symptom("xid", "m", "2026-09-09T12:00:00Z")])]),
        attribution(faulty_nodes=[fake.Verdict("worker-01", [good], probability=1.5)]),
        attribution(faulty_nodes=[fake.Verdict("worker-01", [good], probability=float("nan"))]),
        attribution(faulty_nodes=[fake.Verdict("worker-01", [good], probability=True)]),
        attribution(faulty_nodes=[fake.Verdict("worker-01", None)]),
        attribution(analysed_nodes=["worker-01", 2]),
        attribution(job_verdict=fake.Verdict(None, [object()])),
        attribution(insufficient_telemetry="no"),
        attribution(
            faulty_nodes=[fake.Verdict("worker-01", [fake.Symptom("xid", "m", datetime.min.replace(tzinfo=CEST))])]
        ),
    ]


@pytest.mark.parametrize("case", range(22))
def test_unreadable_result_is_a_processing_error(fake: ModuleType, provider: FactProvider, case: int) -> None:
    results = _unreadable(fake)
    assert len(results) == 22
    fake.ANSWERS["start"].append(results[case])
    with pytest.raises(ProviderProcessingError) as raised:
        provider.fast(request(), deadline(), None)
    assert str(raised.value) == "FACT answered with an unreadable result"


# ---------------------------------------------------------------- slow


def test_slow_continues_the_attributor_over_the_window(fake: ModuleType, provider: FactProvider) -> None:
    verdict = fake.Verdict("worker-03", [symptom(fake, "DCGM diag fail", 9, "dcgmi diag -r 3: memory test failed")])
    fake.ANSWERS["continue"].append(fake.Attribution("attr-42", faulty_nodes=[verdict], analysed_nodes=list(NODES)))
    slow_request = request(phase=Phase.SLOW, window=WINDOW)
    outcome = provider.slow(slow_request, {"attributor_id": "attr-42"}, deadline(), TraceContext(TRACEPARENT))
    [(call, arguments)] = fake.CALLS
    assert call == "continue"
    assert 0 < arguments.pop("timeout") <= 10.0
    assert arguments == {
        "attributor_id": "attr-42",
        "start_time": WINDOW[0],
        "end_time": WINDOW[1],
        "headers": {"traceparent": TRACEPARENT},
    }
    [finding] = outcome.attributions
    assert (finding.target, finding.error_category) == (NodeTarget("worker-03"), "dcgm_diag_fail")
    assert outcome.unattributed_targets == (NodeTarget("worker-01"), NodeTarget("worker-02"))


@pytest.mark.parametrize("state", [{}, {"attributor_id": 42}, {"attributor_id": ""}, {"other": "x"}])
def test_slow_without_an_attributor_id_has_no_attribution(
    fake: ModuleType, provider: FactProvider, state: dict[str, str | int]
) -> None:
    outcome = provider.slow(request(phase=Phase.SLOW, window=WINDOW), state, deadline(), None)
    assert outcome.error is not None and outcome.error.type is ErrorType.NO_ATTRIBUTION_AVAILABLE
    assert outcome.attributions == () and outcome.unattributed_targets == ()
    assert fake.CALLS == []


def test_slow_without_a_window_does_not_call_fact(fake: ModuleType, provider: FactProvider) -> None:
    outcome = provider.slow(request(phase=Phase.SLOW), {"attributor_id": "a"}, deadline(), None)
    assert outcome.error is not None and outcome.error.type is ErrorType.NO_ATTRIBUTION_AVAILABLE
    assert fake.CALLS == []


def test_slow_maps_client_errors_like_fast(fake: ModuleType, provider: FactProvider) -> None:
    fake.ANSWERS["continue"] += [fake.TimeoutError(), RuntimeError("boom"), fake.Attribution("a", faulty_nodes=None)]
    slow_request = request(phase=Phase.SLOW, window=WINDOW)
    with pytest.raises(ProviderTimeoutError):
        provider.slow(slow_request, {"attributor_id": "a"}, deadline(), None)
    with pytest.raises(ProviderProcessingError, match="^FACT failed while attributing the failure$"):
        provider.slow(slow_request, {"attributor_id": "a"}, deadline(), None)
    with pytest.raises(ProviderProcessingError, match="^FACT answered with an unreadable result$"):
        provider.slow(slow_request, {"attributor_id": "a"}, deadline(), None)

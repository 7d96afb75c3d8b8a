"""FACT behind the Flask app with times at the ends of the calendar: every valid timestamp is served, none fails.

Year 1 and year 9999 are valid RFC 3339 times; a request carrying them gets FACT's answer like any other, never a
service_error and never an error-level log record.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from types import ModuleType

import pytest

from tests.fact.support import NODES, body
from tests.fact.test_app import fact_app, post

FIRST = "0001-01-01T00:00:00Z"
LAST = "9999-12-31T23:59:59.999999Z"
ENDS = [FIRST, "0001-01-01T00:05:00Z", "9999-12-31T23:58:00Z", LAST]


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def no_error_records(caplog: pytest.LogCaptureFixture) -> None:
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


@pytest.mark.parametrize("detected_at", ENDS)
def test_fast_at_the_ends_of_the_calendar_reaches_fact(
    fake: ModuleType, caplog: pytest.LogCaptureFixture, detected_at: str
) -> None:
    observed = utc(detected_at)
    verdict = fake.Verdict("worker-02", [fake.Symptom("GPU Xid", "NVRM: Xid 79", observed)])
    fake.ANSWERS["start"].append(fake.Attribution("attr-1", faulty_nodes=[verdict], analysed_nodes=list(NODES)))
    answer = post(fact_app(), body(failure_context={"detected_at": detected_at, "detection_signal": "xid"}))
    assert "error" not in answer, answer
    [finding] = answer["attributions"]
    assert finding["target"] == {"type": "Node", "name": "worker-02"}
    assert utc(finding["observed_at"]) == observed
    [(_, arguments)] = fake.CALLS
    assert arguments["detected_at"] == observed
    no_error_records(caplog)


@pytest.mark.parametrize(
    ("start", "end"),
    [(FIRST, "0001-01-01T00:00:00.000001Z"), ("9999-12-31T23:59:59Z", LAST), (FIRST, LAST)],
)
def test_slow_with_a_window_at_the_ends_of_the_calendar_reaches_fact(
    fake: ModuleType, caplog: pytest.LogCaptureFixture, start: str, end: str
) -> None:
    fake.ANSWERS["start"].append(fake.Attribution("attr-1", analysed_nodes=list(NODES)))
    app = fact_app()
    session = post(app, body(failure_context={"detected_at": end, "detection_signal": "xid"}))["attribution_session_id"]
    fake.ANSWERS["continue"].append(fake.Attribution("attr-1", analysed_nodes=list(NODES)))
    slow = body("slow", session=session, failure_context={"detected_at": end, "detection_signal": "xid"})
    slow["scope"] |= {"start_time": start, "end_time": end}
    answer = post(app, slow)
    assert "error" not in answer, answer
    assert answer["attribution_session_id"] == session
    (_, _), (call, arguments) = fake.CALLS
    assert call == "continue"
    assert (arguments["start_time"], arguments["end_time"]) == (utc(start), utc(end))
    no_error_records(caplog)

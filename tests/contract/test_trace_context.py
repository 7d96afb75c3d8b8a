"""W3C Trace Context (docs/contract.md, "Headers"): a valid pair reaches the provider; an invalid one is ignored and
never changes the status."""

from __future__ import annotations

import pytest

from providers.base import TraceContext
from tests.contract.conftest import VALID_TRACEPARENT, check_200, check_422, post, slow_request, valid_request

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"
TRACESTATE = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"


def _trace_received(provider):
    return provider.calls[-1][3]


@pytest.mark.parametrize("flags", ["01", "00"])
def test_valid_traceparent_reaches_the_provider(client, provider, flags):
    traceparent = f"00-{TRACE_ID}-{SPAN_ID}-{flags}"
    check_200(post(client, valid_request(), headers={"traceparent": traceparent}))
    trace = _trace_received(provider)
    assert isinstance(trace, TraceContext)
    assert trace.traceparent == traceparent
    assert trace.trace_id == TRACE_ID
    assert not trace.tracestate


def test_valid_pair_reaches_the_provider(client, provider):
    check_200(post(client, valid_request(), headers={"traceparent": VALID_TRACEPARENT, "tracestate": TRACESTATE}))
    assert _trace_received(provider) == TraceContext(VALID_TRACEPARENT, TRACESTATE)


def test_valid_pair_reaches_the_slow_call(client, provider):
    session_id = check_200(post(client, valid_request()))["attribution_session_id"]
    headers = {"traceparent": VALID_TRACEPARENT, "tracestate": TRACESTATE}
    check_200(post(client, slow_request(session_id), headers=headers))
    assert provider.calls[-1][0] == "slow"
    assert _trace_received(provider) == TraceContext(VALID_TRACEPARENT, TRACESTATE)


def test_no_trace_headers_gives_none(client, provider):
    check_200(post(client, valid_request()))
    assert _trace_received(provider) is None


INVALID_TRACEPARENTS = [
    pytest.param("garbage", id="garbage"),
    pytest.param("", id="empty"),
    pytest.param(f"00-{'0' * 32}-{SPAN_ID}-01", id="all-zero-trace-id"),
    pytest.param(f"00-{TRACE_ID}-{'0' * 16}-01", id="all-zero-span-id"),
    pytest.param(f"ff-{TRACE_ID}-{SPAN_ID}-01", id="version-ff"),
    pytest.param(f"0-{TRACE_ID}-{SPAN_ID}-01", id="short-version"),
    pytest.param(f"00-{TRACE_ID[:-1]}-{SPAN_ID}-01", id="short-trace-id"),
    pytest.param(f"00-{TRACE_ID}0-{SPAN_ID}-01", id="long-trace-id"),
    pytest.param(f"00-{TRACE_ID}-{SPAN_ID[:-1]}-01", id="short-span-id"),
    pytest.param(f"00-{TRACE_ID}-{SPAN_ID}-1", id="short-flags"),
    pytest.param(f"00-{TRACE_ID.replace('4', 'g')}-{SPAN_ID}-01", id="non-hex"),
    pytest.param(f"00-{TRACE_ID}-{SPAN_ID}-01-extra", id="version-00-with-extra-field"),
    pytest.param(f"00_{TRACE_ID}_{SPAN_ID}_01", id="wrong-separator"),
    pytest.param(f"01-{TRACE_ID}-{SPAN_ID}-01-" + "a" * 300, id="oversized"),
    pytest.param(VALID_TRACEPARENT + " " * 300, id="oversized-by-padding"),
]


@pytest.mark.parametrize("traceparent", INVALID_TRACEPARENTS)
def test_invalid_traceparent_is_ignored_and_the_status_is_unchanged(client, provider, traceparent):
    headers = {"traceparent": traceparent, "tracestate": TRACESTATE}
    body = check_200(post(client, valid_request(), headers=headers))
    assert "error" not in body
    assert _trace_received(provider) is None


@pytest.mark.parametrize("traceparent", INVALID_TRACEPARENTS[:5])
def test_invalid_traceparent_does_not_change_a_422(client, provider, traceparent):
    response = post(client, valid_request(timeout_ms=0), headers={"traceparent": traceparent})
    check_422(response, provider, count=1)


def test_valid_traceparent_does_not_change_a_422(client, provider):
    check_422(post(client, b"[]", headers={"traceparent": VALID_TRACEPARENT}), provider, count=1)


def test_tracestate_without_traceparent_is_ignored(client, provider):
    check_200(post(client, valid_request(), headers={"tracestate": TRACESTATE}))
    assert _trace_received(provider) is None


@pytest.mark.parametrize(
    "tracestate",
    [pytest.param("k=" + "v" * 9000, id="oversized"), pytest.param("not a tracestate!!", id="malformed")],
)
def test_invalid_tracestate_is_dropped_but_a_valid_traceparent_still_passes(client, provider, tracestate):
    check_200(post(client, valid_request(), headers={"traceparent": VALID_TRACEPARENT, "tracestate": tracestate}))
    trace = _trace_received(provider)
    assert trace is not None and trace.traceparent == VALID_TRACEPARENT
    assert not trace.tracestate


def test_trace_headers_are_not_echoed_as_credentials(client):
    response = post(client, valid_request(), headers={"traceparent": VALID_TRACEPARENT, "tracestate": TRACESTATE})
    check_200(response)
    assert TRACESTATE not in response.get_data(as_text=True)

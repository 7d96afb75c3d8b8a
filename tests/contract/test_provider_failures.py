"""Provider failures (docs/contract.md, "Phases and sessions" and "HTTP status codes"): a processing failure is a
200 with a typed error, a construction failure a 500, and the wait is bounded by `timeout_ms`."""

from __future__ import annotations

import threading
import time

import pytest

from providers.base import (
    AttributionOutcome,
    ProviderConstructionError,
    ProviderProcessingError,
    ProviderTimeoutError,
)
from tests.contract.conftest import (
    NamedFakeProvider,
    check_200,
    check_detail,
    check_empty_error,
    echo_fast,
    make_client,
    post,
    raising,
    slow_request,
    valid_request,
)
from tests.fakes import FakeProvider

SECRET = "password=hunter2"
STACK = f'Traceback (most recent call last):\n  File "/srv/provider.py", line 42, in fast\n    connect({SECRET})'


def _session(client):
    return check_200(post(client, valid_request()))["attribution_session_id"]


def _client_failing(phase, behaviour, **settings):
    """A client whose `phase` call does `behaviour`; for slow, with a session from a working fast."""
    if phase == "fast":
        provider = NamedFakeProvider("fake", fast=behaviour)
    else:
        provider = NamedFakeProvider("fake", fast=echo_fast, slow=behaviour)
    client = make_client(provider, **settings)
    body = valid_request() if phase == "fast" else slow_request(_session(client))
    return provider, client, body


# ---------------------------------------------------------------- timeout_ms


class SlowOnce(FakeProvider):
    """The first call of each phase sleeps `delay_s`; later calls answer at once. `done` is set when the
    sleeping call returns, so a test can wait for its background thread."""

    def __init__(self, delay_s):
        super().__init__(fast=echo_fast, slow=lambda request, *_: echo_fast(request))
        self.sleep_s = delay_s
        self.done = threading.Event()
        self._slept = False

    def _maybe_sleep(self):
        if not self._slept:
            self._slept = True
            time.sleep(self.sleep_s)
            self.done.set()

    def fast(self, request, deadline, trace):
        self._maybe_sleep()
        return super().fast(request, deadline, trace)

    def slow(self, request, session_state, deadline, trace):
        self._maybe_sleep()
        return super().slow(request, session_state, deadline, trace)


@pytest.mark.parametrize("phase", ["fast", "slow"])
def test_provider_past_timeout_ms_is_a_timeout_and_the_next_request_is_served(phase):
    provider = SlowOnce(delay_s=0.6)
    client = make_client(provider)
    if phase == "slow":
        provider._slept = True
        session_id = _session(client)
        provider._slept = False
        body = slow_request(session_id, timeout_ms=100)
    else:
        session_id = None
        body = valid_request(timeout_ms=100)

    started = time.monotonic()
    response = post(client, body)
    elapsed = time.monotonic() - started
    result = check_empty_error(response, "timeout")
    assert elapsed < 0.5, f"the Adapter waited {elapsed:.3f}s for a 100 ms timeout"
    assert result["error"]["message"]
    if phase == "slow":
        assert result["attribution_session_id"] == session_id

    # The next request is served while the timed-out call still runs in the background.
    follow_up = check_200(post(client, body if phase == "slow" else valid_request(timeout_ms=5000)))
    assert "error" not in follow_up
    assert follow_up["attributions"]
    assert provider.done.wait(2)


def test_provider_within_timeout_ms_is_served():
    provider = FakeProvider(fast=echo_fast, delay_s=0.05)
    body = check_200(post(make_client(provider), valid_request(timeout_ms=2000)))
    assert "error" not in body and body["attributions"]


def test_timeout_with_one_worker_does_not_block_the_service():
    provider = SlowOnce(delay_s=0.3)
    client = make_client(provider, provider_concurrency=1)
    check_empty_error(post(client, valid_request(timeout_ms=50)), "timeout")
    assert provider.done.wait(2)
    assert "error" not in check_200(post(client, valid_request(timeout_ms=2000)))


def test_timeout_answer_still_carries_a_session_for_fast():
    provider = SlowOnce(delay_s=0.3)
    result = check_empty_error(post(make_client(provider), valid_request(timeout_ms=50)), "timeout")
    assert isinstance(result["attribution_session_id"], str)
    assert provider.done.wait(2)


# ---------------------------------------------------------------- typed provider exceptions


@pytest.mark.parametrize("phase", ["fast", "slow"])
def test_processing_error_is_200_service_error_with_its_message(phase):
    provider, client, body = _client_failing(phase, raising(ProviderProcessingError("the Loki query failed")))
    result = check_empty_error(post(client, body), "service_error")
    assert result["error"]["message"] == "the Loki query failed"
    assert [c[0] for c in provider.calls][-1] == phase


@pytest.mark.parametrize("phase", ["fast", "slow"])
def test_provider_timeout_error_is_200_timeout_with_its_message(phase):
    _, client, body = _client_failing(phase, raising(ProviderTimeoutError("Loki did not answer within 5 s")))
    result = check_empty_error(post(client, body), "timeout")
    assert result["error"]["message"] == "Loki did not answer within 5 s"


@pytest.mark.parametrize("exc_type", [ProviderProcessingError, ProviderTimeoutError])
@pytest.mark.parametrize(
    "message",
    [
        pytest.param(f"backend failed\n{STACK}", id="multi-line"),
        pytest.param(f"backend failed\r\n{STACK}", id="crlf"),
        pytest.param("x" * 5000, id="overlong"),
        pytest.param("  backend failed  \n", id="padded"),
    ],
)
def test_provider_error_message_is_one_short_line(exc_type, message):
    kind = "timeout" if exc_type is ProviderTimeoutError else "service_error"
    _, client, body = _client_failing("fast", raising(exc_type(message)))
    text = check_empty_error(post(client, body), kind)["error"]["message"]
    assert text and "\n" not in text and "\r" not in text
    assert len(text) <= 512
    assert "Traceback" not in text and SECRET not in text
    if message.strip().startswith("backend failed"):
        assert text == "backend failed"


@pytest.mark.parametrize("message", ["", "   ", "\n\n"])
def test_provider_error_without_a_message_still_has_one(message):
    _, client, body = _client_failing("fast", raising(ProviderProcessingError(message)))
    assert check_empty_error(post(client, body), "service_error")["error"]["message"].strip()


@pytest.mark.parametrize("phase", ["fast", "slow"])
@pytest.mark.parametrize(
    "exc",
    [
        RuntimeError(STACK),
        ValueError(SECRET),
        KeyError("api_key"),
        TypeError("unsupported operand"),
        ZeroDivisionError("division by zero"),
        OSError(111, "Connection refused"),
        MemoryError(),
        RecursionError("maximum recursion depth exceeded"),
        AssertionError("internal invariant"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_any_other_exception_is_200_service_error_without_details(phase, exc):
    provider, client, body = _client_failing(phase, raising(exc))
    response = post(client, body)
    result = check_empty_error(response, "service_error")
    text = response.get_data(as_text=True)
    assert "Traceback" not in text and SECRET not in text and "api_key" not in text
    assert str(exc) not in result["error"]["message"] or not str(exc)


def test_backend_socket_timeout_is_a_timeout():
    """A builtin TimeoutError (e.g. a socket timeout) means a backend did not answer in time: `timeout`
    (docs/contract.md: "one that does not answer in time is a `timeout`"), with empty findings."""
    _, client, body = _client_failing("fast", raising(TimeoutError("socket timed out")))
    message = check_empty_error(post(client, body), "timeout")["error"]["message"]
    assert message and "\n" not in message and "Traceback" not in message


def test_service_keeps_serving_after_provider_exceptions():
    calls = {"n": 0}

    def flaky(request, *_):
        calls["n"] += 1
        if calls["n"] % 2:
            raise RuntimeError("boom")
        return echo_fast(request)

    client = make_client(NamedFakeProvider("fake", fast=flaky))
    kinds = [check_200(post(client, valid_request())).get("error", {}).get("type") for _ in range(4)]
    assert kinds == ["service_error", None, "service_error", None]


# ---------------------------------------------------------------- construction failures: 500


@pytest.mark.parametrize("phase", ["fast", "slow"])
def test_construction_error_is_500_detail_without_stack(phase):
    _, client, body = _client_failing(
        phase, raising(ProviderConstructionError("the private FACT client is not installed"))
    )
    response = post(client, body)
    detail = check_detail(response, 500)["detail"]
    assert "FACT client" in detail
    assert 'File "' not in detail


@pytest.mark.parametrize("phase", ["fast", "slow"])
def test_construction_error_detail_carries_no_stack_trace(phase):
    """docs/contract.md: 500 `{"detail": str}`, no stack trace, even when the provider's message holds one."""
    message = f"the private FACT client is not installed\n{STACK}"
    _, client, body = _client_failing(phase, raising(ProviderConstructionError(message)))
    response = post(client, body)
    assert response.status_code == 500
    detail = response.get_json()["detail"]
    assert "Traceback" not in detail and 'File "' not in detail and SECRET not in detail, detail
    assert "\n" not in detail
    assert "FACT client" in detail


def test_construction_error_then_the_service_still_answers():
    state = {"n": 0}

    def once(request, *_):
        state["n"] += 1
        if state["n"] == 1:
            raise ProviderConstructionError("credentials file /etc/fact/token is missing")
        return echo_fast(request)

    client = make_client(NamedFakeProvider("fake", fast=once))
    check_detail(post(client, valid_request()), 500)
    assert "error" not in check_200(post(client, valid_request()))


def test_processing_error_is_never_5xx_even_when_the_outcome_is_odd():
    def returns_exception(*_):
        return ProviderProcessingError("returned, not raised")

    client = make_client(NamedFakeProvider("fake", fast=returns_exception))
    check_empty_error(post(client, valid_request()), "service_error")


def test_provider_answering_its_own_timeout_error_is_kept():
    from providers.base import ErrorType, ProviderError

    def gives_timeout(*_):
        return AttributionOutcome(error=ProviderError(ErrorType.TIMEOUT, "the epilog source timed out"))

    client = make_client(NamedFakeProvider("fake", fast=gives_timeout))
    result = check_empty_error(post(client, valid_request()), "timeout")
    assert result["error"]["message"] == "the epilog source timed out"

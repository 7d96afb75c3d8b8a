"""`timeout_ms` with both ways of calling a provider: inline (`keeps_deadline`) and on the pool.

A provider that keeps the deadline runs in the request's thread; any other runs on the pool and the Adapter stops
waiting at the deadline even while it hangs. Either way an answer that arrives after the deadline is a `timeout`.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from app import create_app
from app.settings import Settings
from providers.base import AttributionOutcome, Deadline, NodeTarget, ProviderProcessingError
from providers.telemetry.provider import TelemetryProvider, parse_settings
from tests.contract.conftest import check_200, check_empty_error, echo_fast, make_client, post, valid_request
from tests.fakes import FAKE_PROVIDER, FakeProvider


def _past_deadline(answer: Any) -> Any:
    """A behaviour that ignores its deadline: it waits until the deadline has passed, then answers."""

    def behaviour(request: Any, deadline: Deadline, *_: Any) -> AttributionOutcome:
        for _ in range(2000):  # bounded: timeout_ms in these tests is far below 2000 x 5 ms
            if deadline.expired:
                break
            time.sleep(0.005)
        time.sleep(0.01)
        if isinstance(answer, BaseException):
            raise answer
        return answer(request) if callable(answer) else answer

    return behaviour


@pytest.mark.parametrize("keeps_deadline", [True, False])
def test_a_success_that_comes_after_the_deadline_is_a_timeout(keeps_deadline):
    provider = FakeProvider(fast=_past_deadline(echo_fast))
    provider.keeps_deadline = keeps_deadline
    result = check_empty_error(post(make_client(provider), valid_request(timeout_ms=50)), "timeout")
    assert result["attributions"] == [] and result["unattributed_targets"] == []


def test_a_processing_error_that_comes_after_the_deadline_is_a_timeout():
    provider = FakeProvider(fast=_past_deadline(ProviderProcessingError("backend said no")))
    provider.keeps_deadline = True
    check_empty_error(post(make_client(provider), valid_request(timeout_ms=50)), "timeout")


def test_an_answer_within_the_deadline_is_served_inline_in_the_request_thread():
    seen: list[str] = []

    def fast(request: Any, *_: Any) -> AttributionOutcome:
        seen.append(threading.current_thread().name)
        return echo_fast(request)

    provider = FakeProvider(fast=fast)
    provider.keeps_deadline = True
    request_thread = threading.current_thread().name  # the test client serves the request in this thread
    body = check_200(post(make_client(provider), valid_request(timeout_ms=5000)))
    assert "error" not in body and [f["target"]["name"] for f in body["attributions"]] == ["worker-01"]
    assert seen == [request_thread]


def test_a_provider_without_keeps_deadline_runs_on_the_pool():
    seen: list[str] = []

    def fast(request: Any, *_: Any) -> AttributionOutcome:
        seen.append(threading.current_thread().name)
        return AttributionOutcome(unattributed_targets=tuple(NodeTarget(n) for n in request.scope.nodes))

    provider = FakeProvider(fast=fast)
    assert provider.keeps_deadline is False
    check_200(post(make_client(provider), valid_request(timeout_ms=5000)))
    assert len(seen) == 1 and seen[0].startswith("provider-call")


def test_a_hanging_backend_gets_its_timeout_answer_while_it_still_hangs():
    release, finished = threading.Event(), threading.Event()

    def hang(*_: Any) -> AttributionOutcome:
        try:
            release.wait(30)
            return AttributionOutcome()
        finally:
            finished.set()

    provider = FakeProvider(fast=hang)
    try:
        check_empty_error(post(make_client(provider), valid_request(timeout_ms=100)), "timeout")
        assert not finished.is_set(), "the timeout answer waited for the hanging call"
    finally:
        release.set()
    assert finished.wait(10)


def test_telemetry_keeps_the_deadline_with_files_and_uses_the_pool_with_loki(tmp_path):
    files = TelemetryProvider(
        parse_settings({"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path)})
    )
    loki = TelemetryProvider(
        parse_settings({"ATTRIBUTION_KERNEL_LOG_SOURCE": "loki", "ATTRIBUTION_LOKI_URL": "http://127.0.0.1:9"})
    )
    assert files.keeps_deadline is True and loki.keeps_deadline is False
    # Through the app: an empty log directory is read inline and answered within the deadline.
    app = create_app(
        Settings(
            provider="telemetry",
            options={"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path)},
        )
    )
    body = check_200(post(app.test_client(), valid_request(timeout_ms=5000)))
    assert body.get("error", {}).get("type") != "timeout"


@pytest.mark.parametrize("keeps_deadline", ["0", "1"])
def test_under_gunicorn_a_provider_past_timeout_ms_is_a_timeout(gunicorn, keeps_deadline):
    import requests

    server = gunicorn(
        {
            "ATTRIBUTION_PROVIDER": FAKE_PROVIDER,
            "ATTRIBUTION_FAKE_DELAY_MS": "400",
            "ATTRIBUTION_FAKE_KEEPS_DEADLINE": keeps_deadline,
        }
    )
    url = f"{server.base_url}/v1/attribution"
    late = requests.post(url, json=valid_request(timeout_ms=100), timeout=30)
    assert late.status_code == 200
    assert late.json()["error"]["type"] == "timeout" and late.json()["attributions"] == []
    served = requests.post(url, json=valid_request(timeout_ms=5000), timeout=30)
    assert served.status_code == 200 and "error" not in served.json()

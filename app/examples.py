"""The API reference's request/response examples, produced by running the service: `python -m app.examples`.

Every example is a real call through the Flask test client to an app built by `create_app`, as a caller would
make it. The findings come from the open `telemetry` provider on the sample telemetry in `conf/samples/`. Where
an error needs a failing backend, the backend is made to fail for real: Loki on a loopback port where nothing
listens gives `service_error`. The one exception is `timeout`, which needs a backend that answers late: a small
scripted provider waits past `timeout_ms` and says so in `service.provider`.

Values that differ on every call are made stable so the file can be checked in and compared: `request_id` becomes
a digest of the example's name, and the session codec's clock and nonce are fixed while the examples run, so the
session ids are real ids that the `slow` examples continue. The output is written to `app/openapi_examples.json`,
which `app/openapi.py` embeds in the OpenAPI document.
"""

from __future__ import annotations

import copy
import hashlib
import json
import socket
import sys
import threading
import types
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from unittest import mock

from flask import Flask

from app import create_app, sessions
from app.openapi import EXAMPLES_PATH, SEED_EXAMPLE
from app.settings import Settings
from providers.base import AttributionOutcome, AttributionRequest, Deadline, Provider, TraceContext

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "conf" / "samples"
URL = "/v1/attribution"
#: when the examples' sessions were issued, as the session codec sees it: just after the failure they describe
SESSION_CLOCK = datetime(2026, 9, 9, 12, 0, 5, tzinfo=timezone.utc).timestamp()
#: how long the scripted late backend waits at most for the examples to let it go
LATE_BACKEND_BOUND_S = 10.0

FILES = "the `telemetry` provider on the sample kernel logs and epilog results in `conf/samples/`"


def _files_settings() -> dict[str, str]:
    return {
        "ATTRIBUTION_PROVIDER": "telemetry",
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
        "ATTRIBUTION_KERNEL_LOG_DIR": str(SAMPLES / "kernel-logs"),
        "ATTRIBUTION_EPILOG_DIR": str(SAMPLES / "epilog"),
    }


class LateBackendProvider(Provider):
    """Scripted: a backend that answers only after the caller's `timeout_ms` has passed."""

    name = "scripted-late-backend"
    version = "1"

    def __init__(self) -> None:
        self.release = threading.Event()

    def fast(self, request: AttributionRequest, deadline: Deadline, trace: TraceContext | None) -> AttributionOutcome:
        self.release.wait(LATE_BACKEND_BOUND_S)
        return AttributionOutcome()

    def slow(
        self,
        request: AttributionRequest,
        session_state: Mapping[str, str | int],
        deadline: Deadline,
        trace: TraceContext | None,
    ) -> AttributionOutcome:
        return self.fast(request, deadline, trace)


def _request_id(name: str) -> str:
    return hashlib.sha256(f"attribution-adapter example {name}".encode()).hexdigest()[:32]


@contextmanager
def _stable_sessions() -> Iterator[None]:
    """The session codec with a fixed clock and nonce, so the ids it issues are the same on every run."""
    clock = types.SimpleNamespace(time=lambda: SESSION_CLOCK)
    nonce = types.SimpleNamespace(token_bytes=lambda n: bytes(n))
    with mock.patch.object(sessions, "time", clock), mock.patch.object(sessions, "secrets", nonce):
        yield


@contextmanager
def _app(settings: Mapping[str, str] | None = None, provider: Provider | None = None) -> Iterator[Flask]:
    app = create_app(Settings.from_env(settings) if settings is not None else None, provider)
    app.config["TESTING"] = True
    try:
        yield app
    finally:
        app.extensions["attribution_adapter"].service.close()


@contextmanager
def _unreachable_loki() -> Iterator[str]:
    """A loopback address where nothing listens: the port is held (bound, never listening) so none can take it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}"


def _call(app: Flask, name: str, body: Any, *, raw: bytes | None = None) -> tuple[int, dict[str, Any]]:
    """POST as a caller does; returns the status and the body with its per-call request id made stable."""
    client = app.test_client()
    data = raw if raw is not None else json.dumps(body)
    response = client.post(URL, data=data, headers={"Content-Type": "application/json"})
    answer = response.get_json()
    assert response.headers["X-Request-ID"]
    if isinstance(answer, dict) and "request_id" in answer:
        assert answer["request_id"] == response.headers["X-Request-ID"]
        answer["request_id"] = _request_id(name)
    return response.status_code, answer


def _example(
    name: str, summary: str, produced_by: str, request: Any, status: int, response: Any, *, request_note: str = ""
) -> dict[str, Any]:
    example: dict[str, Any] = {
        "name": name,
        "summary": summary,
        "produced_by": produced_by,
        "status": status,
        "response": response,
    }
    if request is not None:
        example["request"] = request
    if request_note:
        example["request_note"] = request_note
    return example


def build_examples() -> list[dict[str, Any]]:
    """Run every example against the service and return them, in the order the documentation shows them."""
    examples = []
    fast_request = copy.deepcopy(SEED_EXAMPLE)
    slow_request = {
        **copy.deepcopy(SEED_EXAMPLE),
        "scope": {
            "nodes": ["worker-01", "worker-03"],
            "ranks": [],
            "start_time": "2026-09-09T12:05:00Z",
            "end_time": "2026-09-09T12:20:00Z",
        },
        "phase": "slow",
    }
    partial_request = {
        **copy.deepcopy(SEED_EXAMPLE),
        "scope": {"nodes": ["worker-01", "worker-02", "worker-09"], "ranks": [0, 1, 2, 3, 4, 5]},
    }
    with _stable_sessions():
        with _app(_files_settings()) as app:
            status, fast = _call(app, "fast", fast_request)
            examples.append(_example("fast", "fast: a finding with its evidence", FILES, fast_request, status, fast))
            slow_request["continue_session"] = fast["attribution_session_id"]
            status, slow = _call(app, "slow", slow_request)
            examples.append(
                _example(
                    "slow", "slow: the epilog's DCGM result continues the session", FILES, slow_request, status, slow
                )
            )
            status, partial = _call(app, "insufficient_telemetry", partial_request)
            examples.append(
                _example(
                    "insufficient_telemetry",
                    "insufficient_telemetry: one node has no logs; the finding on another stands",
                    FILES,
                    partial_request,
                    status,
                    partial,
                )
            )
            no_window = copy.deepcopy(slow_request)
            del no_window["scope"]["start_time"], no_window["scope"]["end_time"]
            status, refused = _call(app, "no_attribution_available", no_window)
            examples.append(
                _example(
                    "no_attribution_available",
                    "no_attribution_available: slow without its epilog window",
                    FILES + "; the provider is not called",
                    no_window,
                    status,
                    refused,
                )
            )

        late = LateBackendProvider()
        late_request = {**copy.deepcopy(SEED_EXAMPLE), "timeout_ms": 100}
        with _app(provider=late) as app:
            try:
                status, timed_out = _call(app, "timeout", late_request)
            finally:
                late.release.set()
        examples.append(
            _example(
                "timeout",
                "timeout: the backend did not answer within timeout_ms",
                "a scripted provider (`scripted-late-backend`) whose backend answers only after timeout_ms",
                late_request,
                status,
                timed_out,
            )
        )

        with _unreachable_loki() as loki_url:
            loki = {
                "ATTRIBUTION_PROVIDER": "telemetry",
                "ATTRIBUTION_KERNEL_LOG_SOURCE": "loki",
                "ATTRIBUTION_LOKI_URL": loki_url,
            }
            with _app(loki) as app:
                status, failed = _call(app, "service_error", fast_request)
        examples.append(
            _example(
                "service_error",
                "service_error: the log source could not be reached",
                "the `telemetry` provider on Loki, with Loki at a loopback port where nothing listens",
                fast_request,
                status,
                failed,
            )
        )

    invalid = {
        **copy.deepcopy(SEED_EXAMPLE),
        "failure_context": {"detected_at": "2026-09-09T12:00:00", "detection_signal": "application_error"},
        "timeout_ms": "10000",
        "priority": 1,
    }
    with _app(_files_settings()) as app:
        status, problems = _call(app, "422", invalid)
        examples.append(
            _example("422", "422: three problems, each with where and what", FILES, invalid, status, problems)
        )
        limit = app.config["MAX_CONTENT_LENGTH"]
        # A well-formed request padded with white space to one byte past the limit.
        body = json.dumps(fast_request).encode()
        status, too_large = _call(app, "413", None, raw=body + b" " * (limit + 1 - len(body)))
        examples.append(
            _example(
                "413",
                "413: the body is larger than the limit",
                FILES,
                None,
                status,
                too_large,
                request_note=f"a request of {limit + 1} bytes, one past the default limit of {limit} bytes",
            )
        )
    return examples


def render() -> str:
    """The examples file's text: deterministic (sorted keys, fixed indentation), ending in a newline."""
    document = {
        "about": "Real request/response pairs of the Attribution Adapter, written by `python -m app.examples`.",
        "examples": build_examples(),
    }
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    EXAMPLES_PATH.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {EXAMPLES_PATH.relative_to(ROOT)}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

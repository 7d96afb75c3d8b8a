"""Loopback backends for the fault tests: real HTTP servers on 127.0.0.1 that misbehave on purpose.

`Backend` stands in for Loki (`GET /loki/api/v1/query_range`) or FACT (the JSON API of the HTTP `fact_client` in
tests/faults/fact_http_pkg). Its `fault` decides the answer: a valid `payload`, HTTP 500, malformed or truncated
JSON, a huge body, no answer at all (`hang`), an answer after a delay (`late`) or a trickle of bytes (`drip`).
Every handler loop is bounded in time, and the handlers record when the client closed its connection, which is how
the tests see that a provider call really ended.
"""

from __future__ import annotations

import importlib
import json
import select
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from app import create_app
from app.settings import Settings
from providers import load_provider
from tests.gunicorn_process import free_port

FACT_HTTP_PKG = Path(__file__).parent / "fact_http_pkg"
URL = "/v1/attribution"
NODES = ["worker-01", "worker-02", "worker-03"]
OUTSIDE = "intruder-99"
DETECTED_AT = datetime(2026, 9, 9, 12, 0, tzinfo=timezone.utc)
#: the longest any handler keeps a connection open on its own; the tests' liveness bounds are well below it
HANDLER_BOUND_S = 20.0
FAULTS = ("ok", "status500", "malformed", "truncated", "hang", "late", "huge", "drip")


# ---------------------------------------------------------------- the loopback backend


class Backend:
    """A threaded HTTP server on 127.0.0.1 (free port) whose answers follow `fault`; `stop()` closes it."""

    def __init__(self, port: int = 0) -> None:
        self.fault = "ok"
        self.payload: bytes | Callable[[], bytes] = b"{}"
        self.status = 200
        self.late_s = 3.0
        self.huge_chunks: Callable[[], Iterator[bytes]] | None = None
        self.huge_length = 0
        self.requests: list[tuple[str, str, bytes]] = []
        self.opened = 0
        self.closed_by_client: list[float] = []  # monotonic times the client was seen gone
        self.lock = threading.Lock()
        self.client_gone = threading.Condition(self.lock)
        self._stop = threading.Event()
        backend = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep the test output clean
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                backend._serve(self, b"")

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                backend._serve(self, self.rfile.read(length))

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ what a test looks at

    def gone_count(self) -> int:
        with self.lock:
            return len(self.closed_by_client)

    def wait_client_gone(self, count: int, timeout_s: float) -> bool:
        """True when at least `count` hanging/slow connections were closed by the client within `timeout_s`."""
        with self.client_gone:
            return self.client_gone.wait_for(lambda: len(self.closed_by_client) >= count, timeout=timeout_s)

    def stop(self) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)

    # ------------------------------------------------------------ the handlers

    def _gone(self) -> None:
        with self.client_gone:
            self.closed_by_client.append(time.monotonic())
            self.client_gone.notify_all()

    def _serve(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        with self.lock:
            self.requests.append((handler.command, handler.path, body))
            self.opened += 1
        fault = self.fault
        handler.close_connection = True
        try:
            if fault == "hang":
                self._wait_for_close(handler.connection, HANDLER_BOUND_S)
            elif fault == "late":
                if not self._wait_for_close(handler.connection, self.late_s):
                    self._send(handler, 200, self._payload())
            elif fault == "status500":
                self._send(handler, 500, b'{"error": "internal server error"}')
            elif fault == "malformed":
                self._send(handler, 200, b'{"status": "success", "data": {"resultType": "streams", "result": [}')
            elif fault == "truncated":
                whole = self._payload()
                handler.send_response(200)
                handler.send_header("Content-Type", "application/json")
                handler.send_header("Content-Length", str(len(whole) + 4096))
                handler.end_headers()
                handler.wfile.write(whole[: max(1, len(whole) // 2)])
                handler.wfile.flush()
            elif fault == "huge":
                assert self.huge_chunks is not None
                handler.send_response(200)
                handler.send_header("Content-Type", "application/json")
                handler.send_header("Content-Length", str(self.huge_length))
                handler.end_headers()
                for chunk in self.huge_chunks():
                    handler.wfile.write(chunk)
            elif fault == "drip":
                self._drip(handler)
            else:
                self._send(handler, self.status, self._payload())
        except (BrokenPipeError, ConnectionResetError):
            self._gone()

    def _payload(self) -> bytes:
        return self.payload() if callable(self.payload) else self.payload

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def _wait_for_close(self, conn: socket.socket, bound_s: float) -> bool:
        """Hold the connection without answering; True (and recorded) as soon as the client closes it."""
        end = time.monotonic() + bound_s
        while time.monotonic() < end and not self._stop.is_set():
            readable, _, _ = select.select([conn], [], [], 0.05)
            if readable:
                try:
                    data = conn.recv(4096, socket.MSG_PEEK)
                except OSError:
                    data = b""
                if not data:
                    self._gone()
                    return True
                conn.recv(len(data))  # a client never sends more on this connection; drop it
        return False

    def _drip(self, handler: BaseHTTPRequestHandler) -> None:
        """Headers at once, then one byte of a valid body every 0.2 s: never a silence long enough to time out."""
        whole = self._payload()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(whole)))
        handler.end_headers()
        handler.wfile.flush()
        end = time.monotonic() + HANDLER_BOUND_S
        for i in range(len(whole)):
            if time.monotonic() > end or self._stop.is_set():
                return
            handler.wfile.write(whole[i : i + 1])
            handler.wfile.flush()
            if self._wait_for_close(handler.connection, 0.2):
                return


@pytest.fixture
def backend() -> Iterator[Backend]:
    server = Backend()
    yield server
    server.stop()


@pytest.fixture
def refused_url() -> str:
    """A loopback URL whose port has nothing listening: connecting is refused."""
    return f"http://127.0.0.1:{free_port()}"


# ---------------------------------------------------------------- backend answers


def ns(when: datetime) -> str:
    return str(int(when.timestamp()) * 1_000_000_000 + when.microsecond * 1000)


def rsyslog_xid(when: datetime, host: str, code: int = 79) -> str:
    stamp = when.isoformat(timespec="microseconds")
    return (
        f"{stamp} {host} kernel: [679160.239013] NVRM: Xid (PCI:0000:91:00): {code}, pid=1, GPU has fallen off the bus."
    )


def loki_body(lines: dict[str, list[tuple[datetime, str]]]) -> bytes:
    """A Loki `query_range` success body: one stream per host."""
    result = [
        {"stream": {"host": host, "job": "syslog"}, "values": [[ns(t), x] for t, x in v]} for host, v in lines.items()
    ]
    return json.dumps({"status": "success", "data": {"resultType": "streams", "result": result}}).encode()


def loki_xid_on(host: str) -> bytes:
    at = DETECTED_AT - timedelta(minutes=2)
    return loki_body({host: [(at, rsyslog_xid(at, host))]})


def fact_body(
    faulty: list[str], analysed: list[str], symptoms_per_node: int = 1, attributor_id: str = "att-1"
) -> bytes:
    at = (DETECTED_AT - timedelta(minutes=1)).isoformat()
    verdicts = [
        {
            "node": node,
            "symptoms": [
                {"category": "GPU Xid", "message": f"Xid 79 on {node} #{i}", "observed_at": at}
                for i in range(symptoms_per_node)
            ],
            "probability": 0.9,
        }
        for node in faulty
    ]
    return json.dumps(
        {
            "attributor_id": attributor_id,
            "faulty_nodes": verdicts,
            "analysed_nodes": analysed,
            "job_verdict": None,
            "insufficient_telemetry": False,
        }
    ).encode()


# ---------------------------------------------------------------- the Adapter under test


def request_body(timeout_ms: int = 1500, nodes: list[str] | None = None, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "schema_version": "0.1.0",
        "workload_id": "12345",
        "scope": {"nodes": list(NODES if nodes is None else nodes), "ranks": [0, 1]},
        "failure_context": {"detected_at": "2026-09-09T12:00:00Z", "detection_signal": "application_error"},
        "timeout_ms": timeout_ms,
        "workload_context": {"workflow_id": "training-example", "attempt_index": 0},
        "phase": "fast",
    }
    body.update(overrides)
    return body


def loki_options(url: str, **extra: str) -> dict[str, str]:
    return {
        "ATTRIBUTION_PROVIDER": "telemetry",
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "loki",
        "ATTRIBUTION_LOKI_URL": url,
        **extra,
    }


def fact_options(url: str) -> dict[str, str]:
    return {"ATTRIBUTION_PROVIDER": "fact", "ATTRIBUTION_FACT_ENDPOINT": url}


def make_app(options: dict[str, str], provider_concurrency: int = 32) -> Any:
    name = options["ATTRIBUTION_PROVIDER"]
    settings = Settings(provider=name, options=options, provider_concurrency=provider_concurrency)
    return create_app(settings, provider=load_provider(name, options))


@pytest.fixture
def fact_http_client(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The HTTP `fact_client` of tests/faults, importable for this test only (and dropped afterwards)."""
    before = sys.modules.pop("fact_client", None)
    monkeypatch.syspath_prepend(str(FACT_HTTP_PKG))
    module = importlib.import_module("fact_client")
    assert Path(module.__file__).parent.parent == FACT_HTTP_PKG
    yield module
    sys.modules.pop("fact_client", None)
    if before is not None:
        sys.modules["fact_client"] = before


def check_typed_error(response: Any, expected: str) -> dict[str, Any]:
    """A 200 carrying `error.type` == expected, no finding, nothing out of scope; returns the body."""
    assert response.status_code == 200, (response.status_code, response.get_data(as_text=True)[:500])
    data = response.get_json()
    assert data["error"]["type"] == expected, data["error"]
    assert data["attributions"] == []
    check_in_scope(data, NODES)
    assert "Traceback" not in data["error"]["message"]
    return data


def check_in_scope(data: dict[str, Any], nodes: list[str]) -> None:
    targets = [f["target"] for f in data["attributions"]] + data["unattributed_targets"]
    for target in targets:
        assert target["type"] in ("Node", "AllJobResources")
        if target["type"] == "Node":
            assert target["name"] in nodes, target

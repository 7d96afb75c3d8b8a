"""The telemetry provider's `loki` source against a real loopback Loki that fails in every way the issue lists.

Contract (docs/contract.md, "Invariants"): a source that cannot be reached, answers with an error or answers with
something unreadable is a 200 with `error.type` `service_error`; one that does not answer in time is `timeout`;
both with empty `attributions`, and no finding is ever fabricated or names a node outside `scope.nodes`. The
provider call must end (the backend sees its connection closed) and the app must serve the next request.
"""

from __future__ import annotations

import json
import re
import resource
import select
import socket
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from tests.faults.conftest import (
    DETECTED_AT,
    HANDLER_BOUND_S,
    NODES,
    OUTSIDE,
    URL,
    Backend,
    check_in_scope,
    check_typed_error,
    loki_body,
    loki_options,
    loki_xid_on,
    make_app,
    ns,
    request_body,
    rsyslog_xid,
)

#: after the answer, how long the backend may wait to see the provider's connection closed (liveness, not speed)
CLOSE_BOUND_S = 5.0


def serves_next_request(client, backend: Backend) -> None:
    """The same app answers the next request normally once the backend behaves."""
    backend.fault = "ok"
    backend.payload = loki_xid_on("worker-01")
    response = client.post(URL, json=request_body(timeout_ms=5000))
    assert response.status_code == 200
    data = response.get_json()
    assert [f["target"] for f in data["attributions"]] == [{"type": "Node", "name": "worker-01"}]
    assert data["error"]["type"] == "insufficient_telemetry"  # worker-02/03 had no lines: informational


@pytest.fixture
def loki_app(backend: Backend):
    return make_app(loki_options(backend.url))


def test_baseline_valid_answer_gives_a_finding(loki_app, backend: Backend) -> None:
    backend.payload = loki_xid_on("worker-01")
    data = loki_app.test_client().post(URL, json=request_body()).get_json()
    assert data["attributions"][0]["target"] == {"type": "Node", "name": "worker-01"}
    assert data["attributions"][0]["error_category"] == "gpu_off_bus"
    (method, path, _), *_ = backend.requests
    assert method == "GET" and urlparse(path).path == "/loki/api/v1/query_range"


def test_connection_refused_is_service_error(refused_url: str, backend: Backend) -> None:
    client = make_app(loki_options(refused_url)).test_client()
    data = check_typed_error(client.post(URL, json=request_body()), "service_error")
    assert data["unattributed_targets"] == []
    # The same app, re-pointed at nothing new, still answers: a second refused call is as typed as the first.
    check_typed_error(client.post(URL, json=request_body()), "service_error")


@pytest.mark.parametrize("fault", ["status500", "malformed", "truncated"])
def test_erroring_or_unreadable_answer_is_service_error(loki_app, backend: Backend, fault: str) -> None:
    backend.fault = fault
    backend.payload = loki_xid_on("worker-01")  # `truncated` sends half of a body that would give a finding
    client = loki_app.test_client()
    data = check_typed_error(client.post(URL, json=request_body()), "service_error")
    assert data["unattributed_targets"] == []
    assert len(backend.requests) == 1
    serves_next_request(client, backend)


@pytest.mark.parametrize("fault", ["hang", "late"])
def test_no_answer_in_time_is_timeout_and_the_call_ends(loki_app, backend: Backend, fault: str) -> None:
    backend.fault = fault
    backend.late_s = 4.0  # `late`: a valid answer, long after timeout_ms
    backend.payload = loki_xid_on("worker-01")
    client = loki_app.test_client()
    started = time.monotonic()
    data = check_typed_error(client.post(URL, json=request_body(timeout_ms=800)), "timeout")
    assert time.monotonic() - started < 10  # liveness: the request did not wait on the backend
    assert data["unattributed_targets"] == []
    # The provider call ended: its HTTP connection to the backend was closed soon after the deadline.
    assert backend.wait_client_gone(1, CLOSE_BOUND_S), "the provider never closed its connection to Loki"
    serves_next_request(client, backend)


def test_trickling_answer_is_timeout_and_the_call_ends(loki_app, backend: Backend) -> None:
    """A Loki that sends a byte every 0.2 s never trips a per-read timeout: the call must still end.

    `requests`' `timeout=` bounds each socket read, not the whole answer, so the provider thread (and its pool
    slot and connection) can outlive the deadline for as long as the backend keeps trickling.
    """
    backend.fault = "drip"
    backend.payload = loki_xid_on("worker-01")
    client = loki_app.test_client()
    check_typed_error(client.post(URL, json=request_body(timeout_ms=800)), "timeout")
    assert backend.wait_client_gone(1, CLOSE_BOUND_S), (
        "the provider call went on past timeout_ms: the Loki connection was still open "
        f"{CLOSE_BOUND_S} s after the timeout answer"
    )
    serves_next_request(client, backend)


def test_trickling_answers_do_not_starve_later_requests(backend: Backend) -> None:
    """With ATTRIBUTION_PROVIDER_CONCURRENCY=1, one trickling Loki answer must not time out the next request.

    The next request's Loki answers at once; it can only time out if the earlier call still holds the pool slot.
    """
    client = make_app(loki_options(backend.url), provider_concurrency=1).test_client()
    backend.fault = "drip"
    backend.payload = loki_xid_on("worker-01")
    check_typed_error(client.post(URL, json=request_body(timeout_ms=500)), "timeout")
    backend.fault = "ok"
    response = client.post(URL, json=request_body(timeout_ms=3000))
    assert response.status_code == 200
    data = response.get_json()
    assert data.get("error", {}).get("type") != "timeout", (
        "a healthy Loki answer timed out: the earlier trickling call still holds the provider pool"
    )
    assert [f["target"]["name"] for f in data["attributions"]] == ["worker-01"]


def _huge_body(entries: int) -> tuple[int, Iterator[bytes]]:
    """A valid Loki page of `entries` fixed-width lines of worker-01 (one Xid 79 among them), as chunks."""
    start = DETECTED_AT - timedelta(minutes=10)
    head = b'{"status": "success", "data": {"resultType": "streams", "result": [{"stream": {"host": "worker-01"}, '
    head += b'"values": ['
    tail = b"]}]}}"

    def entry(i: int) -> bytes:
        at = start + timedelta(microseconds=i * 1000)
        line = (
            rsyslog_xid(at, "worker-01")
            if i == entries // 2
            else (
                f"{at.isoformat(timespec='microseconds')} worker-01 kernel: [1.000000] usb 1-1: new device {i:09d} "
                + "x" * 60
            )
        )
        return json.dumps([ns(at), line]).encode()

    def chunks() -> Iterator[bytes]:
        yield head
        batch: list[bytes] = []
        for i in range(entries):
            batch.append(entry(i))
            if len(batch) == 5000:
                yield b",".join(batch) + (b"," if i < entries - 1 else b"")
                batch = []
        if batch:
            yield b",".join(batch)
        yield tail

    length = sum(len(c) for c in chunks())
    return length, chunks()


def test_huge_answer_is_bounded_and_contract_valid(loki_app, backend: Backend) -> None:
    """A 50 MB page (far more entries than `limit`) must not exhaust memory and must give a valid answer."""
    entries = 290_000
    length, _ = _huge_body(entries)
    assert length > 45 * 1024 * 1024
    first_start: list[str] = []

    def huge_then_empty() -> Iterator[bytes]:
        # Only the first page is huge; a later page (start moved on) is empty, so the test stays quick.
        _, path, _ = backend.requests[-1]
        start = parse_qs(urlparse(path).query)["start"][0]
        if not first_start:
            first_start.append(start)
        if start == first_start[0] and len(backend.requests) == 1:
            yield from _huge_body(entries)[1]
        else:
            yield loki_body({}).ljust(length, b" ")

    backend.fault = "huge"
    backend.huge_length = length
    backend.huge_chunks = huge_then_empty
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    client = loki_app.test_client()
    response = client.post(URL, json=request_body(timeout_ms=60000))
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    print(f"\nhuge Loki page: {length / 2**20:.1f} MiB body, peak RSS grew {grown_mib:.0f} MiB")
    assert response.status_code == 200
    data = response.get_json()
    check_in_scope(data, NODES)
    error = (data.get("error") or {}).get("type")
    assert error in (None, "insufficient_telemetry", "timeout", "service_error")
    if error in (None, "insufficient_telemetry"):
        assert [f["target"]["name"] for f in data["attributions"]] == ["worker-01"]
        assert all(len(f["evidence"]) <= 32 for f in data["attributions"])
        assert all(len(e["message"]) <= 4096 for f in data["attributions"] for e in f["evidence"])
    else:
        assert data["attributions"] == []
    assert grown_mib < 1024, "a 50 MB answer must not take a gigabyte"
    serves_next_request(client, backend)


def test_nodes_outside_the_scope_are_never_reported(loki_app, backend: Backend) -> None:
    at = DETECTED_AT - timedelta(minutes=1)
    backend.payload = loki_body({OUTSIDE: [(at, rsyslog_xid(at, OUTSIDE))]})
    client = loki_app.test_client()
    response = client.post(URL, json=request_body())
    # Lines of a host outside the scope are not telemetry of the scope: nothing was found for it.
    data = check_typed_error(response, "insufficient_telemetry")
    assert data["unattributed_targets"] == []
    assert OUTSIDE not in response.get_data(as_text=True)

    # Beside an in-scope finding, the outside host's Xid is still dropped.
    backend.payload = loki_body(
        {OUTSIDE: [(at, rsyslog_xid(at, OUTSIDE))], "worker-01": [(at, rsyslog_xid(at, "worker-01"))]}
    )
    response = client.post(URL, json=request_body())
    data = response.get_json()
    assert [f["target"] for f in data["attributions"]] == [{"type": "Node", "name": "worker-01"}]
    assert OUTSIDE not in response.get_data(as_text=True)
    check_in_scope(data, NODES)


# ---------------------------------------------------------------- a scope split over several queries

#: a scope large enough for several queries; each name's place in them is found by the stub from the query itself
WIDE_SCOPE = [f"gpu-node-{i:04d}.cluster.example.internal" for i in range(1200)]
FAULTY = "gpu-node-0900.cluster.example.internal"  # its query hangs or fails
BROKEN_GPU = "gpu-node-0001.cluster.example.internal"  # has an Xid 79, in a query that answers


class _SplitLoki:
    """A loopback Loki that answers each query for its own names: one healthy line each, an Xid on BROKEN_GPU;
    the query holding FAULTY hangs (until the client goes, at most HANDLER_BOUND_S) or answers HTTP 500."""

    def __init__(self, fault: str) -> None:
        self.fault = fault
        self.queries: list[list[str]] = []
        self.gone = threading.Event()
        split = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                query = parse_qs(urlparse(self.path).query)["query"][0]
                # Plain names: the string holds no escape but the regex's doubled backslashes.
                pattern = re.compile(query[query.index('=~"') + 3 : query.rindex('"')].replace("\\\\", "\\"))
                names = [n for n in [*WIDE_SCOPE, "worker-01"] if pattern.fullmatch(n)]
                split.queries.append(names)
                self.close_connection = True
                if FAULTY in names and split.fault == "hang":
                    end = time.monotonic() + HANDLER_BOUND_S
                    while time.monotonic() < end:
                        readable, _, _ = select.select([self.connection], [], [], 0.05)
                        if readable and not self.connection.recv(1, socket.MSG_PEEK):
                            split.gone.set()
                            return
                    return
                if FAULTY in names:
                    self._send(500, b'{"error": "internal"}')
                    return
                at = DETECTED_AT - timedelta(minutes=3)
                lines = {n: [(at, f"{at.isoformat()} {n} kernel: usb 1-1: new device")] for n in names}
                if BROKEN_GPU in names:
                    lines[BROKEN_GPU].append((at, rsyslog_xid(at, BROKEN_GPU)))
                self._send(200, loki_body(lines))

            def _send(self, status: int, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> _SplitLoki:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.mark.parametrize("fault", ["hang", "status500"])
def test_one_failing_query_of_many_keeps_the_others_findings(fault: str) -> None:
    """A query that hangs past the deadline or fails: the other queries' findings stay, its nodes are reported
    as not read (never unattributed), and a hanging query does not hold the answer past timeout_ms."""
    with _SplitLoki(fault) as loki:
        client = make_app(loki_options(loki.url, ATTRIBUTION_LOKI_CONCURRENCY="4")).test_client()
        started = time.monotonic()
        response = client.post(URL, json=request_body(timeout_ms=2000, nodes=WIDE_SCOPE))
        elapsed = time.monotonic() - started
        assert response.status_code == 200
        data = response.get_json()
        check_in_scope(data, WIDE_SCOPE)
        assert len(loki.queries) >= 3  # the scope was split
        (lost,) = [q for q in loki.queries if FAULTY in q]
        assert [f["target"]["name"] for f in data["attributions"]] == [BROKEN_GPU]
        assert data["error"]["type"] == "insufficient_telemetry"
        assert f"the kernel logs of {len(lost)} node(s) could not be read from Loki" in data["error"]["message"]
        unattributed = {t["name"] for t in data["unattributed_targets"]}
        assert unattributed == set(WIDE_SCOPE) - set(lost) - {BROKEN_GPU}
        assert elapsed < 10  # liveness only: the answer came, with the others' findings, not a timeout
        if fault == "hang":
            assert loki.gone.wait(5), "the hanging query's connection was never closed"


def test_every_query_failing_is_service_error() -> None:
    with _SplitLoki("status500") as loki:
        client = make_app(loki_options(loki.url)).test_client()
        # Every query holds FAULTY's name when the scope is just it and a few others.
        response = client.post(URL, json=request_body(nodes=[FAULTY, "worker-01"]))
    data = check_typed_error(response, "service_error")
    assert data["error"]["message"] == "the Loki log source answered HTTP 500"

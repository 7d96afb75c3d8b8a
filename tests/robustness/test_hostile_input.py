"""Hostile input against a real gunicorn (fake provider), over raw sockets where a client library cannot produce it.

Each hostile request gets a contract answer (422 `{"detail": [{loc, msg, type}]}` or a readable 413 `{"detail": str}`)
and leaves the service healthy: `/healthz` answers, the same worker processes serve, and the next request is served
on a fresh connection and, where the answer kept it (not after a 413), on the same keep-alive connection. Every loop
is bounded.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
import requests

from app.openapi import SEED_EXAMPLE as SEED_REQUEST

LIMIT = 4 * 1024 * 1024  # the default body limit
IO_TIMEOUT_S = 15.0
VALID = json.dumps(SEED_REQUEST).encode()


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes = field(repr=False)

    def json(self):
        assert self.headers.get("content-type", "").startswith("application/json"), self.headers
        return json.loads(self.body)


class Connection:
    """One HTTP/1.1 connection to 127.0.0.1 over a raw socket; reads are bounded by IO_TIMEOUT_S."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT_S)
        self.buffer = b""
        self.send_error: OSError | None = None

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_in_background(self, data: bytes) -> threading.Thread:
        """Send while the caller reads, as a client does that watches for an early answer."""

        def run() -> None:
            try:
                self.sock.sendall(data)
            except OSError as exc:  # the server may stop reading once it has answered
                self.send_error = exc

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    def _fill(self, deadline: float) -> bool:
        if time.monotonic() > deadline:
            raise AssertionError("no complete answer in time")
        chunk = self.sock.recv(65536)
        self.buffer += chunk
        return bool(chunk)

    def read_answer(self) -> Answer:
        deadline = time.monotonic() + IO_TIMEOUT_S
        while b"\r\n\r\n" not in self.buffer:
            if not self._fill(deadline):
                raise AssertionError(f"connection closed before an answer: {self.buffer[:200]!r}")
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers["content-length"])
        while len(self.buffer) < length:
            if not self._fill(deadline):
                raise AssertionError("connection closed inside the answer body")
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return Answer(int(status_line.split()[1]), headers, body)

    def exchange(self, data: bytes) -> Answer:
        self.send(data)
        return self.read_answer()

    def is_closed_by_server(self) -> bool:
        self.sock.settimeout(5)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


def request_bytes(
    body: bytes, content_type: str | None = "application/json", path: str = "/v1/attribution", method: str = "POST"
) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    if content_type is not None:
        head += f"Content-Type: {content_type}\r\n"
    head += f"Content-Length: {len(body)}\r\n\r\n"
    return head.encode("latin-1") + body


def chunked_request_bytes(chunks: Iterator[bytes]) -> bytes:
    head = b"POST /v1/attribution HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    head += b"Transfer-Encoding: chunked\r\n\r\n"
    return head + b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks) + b"0\r\n\r\n"


def assert_problem_list(answer: Answer, loc: list | None = None) -> list[dict]:
    assert answer.status == 422, (answer.status, answer.body[:300])
    assert answer.headers.get("x-request-id")
    data = answer.json()
    assert set(data) == {"detail"} and isinstance(data["detail"], list) and data["detail"]
    for problem in data["detail"]:
        assert set(problem) == {"loc", "msg", "type"}
        assert isinstance(problem["loc"], list) and isinstance(problem["msg"], str) and isinstance(problem["type"], str)
    if loc is not None:
        assert loc in [problem["loc"] for problem in data["detail"]], data
    return data["detail"]


def assert_too_large(answer: Answer) -> None:
    assert answer.status == 413, (answer.status, answer.body[:300])
    assert answer.headers.get("x-request-id")
    data = answer.json()
    assert set(data) == {"detail"} and isinstance(data["detail"], str) and data["detail"]


def assert_served(answer: Answer) -> None:
    assert answer.status == 200, (answer.status, answer.body[:300])
    data = answer.json()
    assert data["attributions"][0]["target"] == {"type": "Node", "name": "worker-01"}


@pytest.fixture
def healthy_after(server):
    """Checks, after the test, that the service is healthy: the same workers, /healthz, a fresh connection."""
    workers = server.worker_pids()
    assert len(workers) == 2
    yield server
    fresh = Connection(server.port)
    try:
        assert_served(fresh.exchange(request_bytes(VALID)))
        health = fresh.exchange(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert health.status == 200 and health.json() == {"status": "ok"}
    finally:
        fresh.close()
    assert server.worker_pids() == workers, "a worker died or was replaced"


def body_with(**changes) -> bytes:
    body = json.loads(VALID)
    for dotted, value in changes.items():
        target = body
        *parents, last = dotted.split("__")
        for key in parents:
            target = target[key]
        target[last] = value
    return json.dumps(body).encode()


def valid_text_with(old: bytes, new: bytes) -> bytes:
    assert old in VALID
    return VALID.replace(old, new, 1)


MB2 = 2 * 1024 * 1024
REFUSED = [
    # (id, body, content type, expected loc)
    ("nested-arrays-100k", b"[" * 100_000, "application/json", ["body"]),
    ("nested-objects-100k", b'{"a":' * 100_000, "application/json", ["body"]),
    ("nested-inside-a-field", valid_text_with(b'["worker-01"]', b"[" * 50_000), "application/json", ["body"]),
    (
        "nodes-16385",
        body_with(scope__nodes=[f"n{i}" for i in range(16385)]),
        "application/json",
        ["body", "scope", "nodes"],
    ),
    ("ranks-262145", body_with(scope__ranks=list(range(262145))), "application/json", ["body", "scope", "ranks"]),
    ("workload-id-257", body_with(workload_id="w" * 257), "application/json", ["body", "workload_id"]),
    ("workload-id-2MiB", body_with(workload_id="w" * MB2), "application/json", ["body", "workload_id"]),
    ("unknown-field-2MiB", body_with(padding="p" * MB2), "application/json", ["body", "padding"]),
    ("node-2MiB", body_with(scope__nodes=["n" * MB2]), "application/json", ["body", "scope", "nodes", 0]),
    ("lone-high-surrogate", valid_text_with(b'"12345"', rb'"\ud800"'), "application/json", ["body", "workload_id"]),
    (
        "lone-low-surrogate-node",
        valid_text_with(b'"worker-01"', rb'"a\udc00"'),
        "application/json",
        ["body", "scope", "nodes", 0],
    ),
    ("surrogate-key", valid_text_with(b'"phase"', rb'"\ud800": 1, "phase"'), "application/json", ["body", "\ud800"]),
    ("raw-control-char", valid_text_with(b'"12345"', b'"12\x0145"'), "application/json", ["body"]),
    ("raw-nul", valid_text_with(b'"12345"', b'"12\x0045"'), "application/json", ["body"]),
    ("raw-newline-in-string", valid_text_with(b'"12345"', b'"12\n45"'), "application/json", ["body"]),
    ("raw-del", valid_text_with(b'"12345"', b'"12\x7f45"'), "application/json", ["body", "workload_id"]),
    (
        "escaped-control-char",
        valid_text_with(b'"12345"', rb'"12\u000145"'),
        "application/json",
        ["body", "workload_id"],
    ),
    ("escaped-nul", valid_text_with(b'"12345"', rb'"12\u000045"'), "application/json", ["body", "workload_id"]),
    ("duplicate-top-key", valid_text_with(b'"phase"', b'"phase": "slow", "phase"'), "application/json", ["body"]),
    ("duplicate-nested-key", valid_text_with(b'"ranks"', b'"ranks": [], "ranks"'), "application/json", ["body"]),
    ("nan", valid_text_with(b"10000", b"NaN"), "application/json", ["body"]),
    ("infinity", valid_text_with(b"10000", b"Infinity"), "application/json", ["body"]),
    ("minus-infinity", valid_text_with(b"10000", b"-Infinity"), "application/json", ["body"]),
    ("invalid-utf8-ff", valid_text_with(b'"12345"', b'"12\xff45"'), "application/json", ["body"]),
    ("invalid-utf8-overlong", valid_text_with(b'"12345"', b'"12\xc0\xaf45"'), "application/json", ["body"]),
    ("invalid-utf8-surrogate", valid_text_with(b'"12345"', b'"12\xed\xa0\x8045"'), "application/json", ["body"]),
    ("invalid-utf8-truncated", VALID[:-1] + b'"\xe2\x82', "application/json", ["body"]),
    ("utf8-bom", b"\xef\xbb\xbf" + VALID, "application/json", ["body"]),
    ("utf16", VALID.decode().encode("utf-16"), "application/json", ["body"]),
    ("empty-body", b"", "application/json", ["body"]),
    ("not-an-object", b"[]", "application/json", ["body"]),
    ("a-bare-string", b'"x"', "application/json", ["body"]),
    ("null", b"null", "application/json", ["body"]),
    ("trailing-garbage", VALID + b"x", "application/json", ["body"]),
    ("two-documents", VALID + VALID, "application/json", ["body"]),
    ("text-plain", VALID, "text/plain", ["header", "content-type"]),
    ("form", b"schema_version=0.1.0&phase=fast", "application/x-www-form-urlencoded", ["header", "content-type"]),
    ("multipart", b"--b\r\n\r\nx\r\n--b--\r\n", "multipart/form-data; boundary=b", ["header", "content-type"]),
    ("no-content-type", VALID, None, ["header", "content-type"]),
    ("latin-1-charset", VALID, "application/json; charset=latin-1", ["header", "content-type"]),
    ("utf-16-charset", VALID, "application/json; charset=utf-16", ["header", "content-type"]),
    ("json-suffix-type", VALID, "application/merge-patch+json", ["header", "content-type"]),
]


@pytest.mark.parametrize(("body", "content_type", "loc"), [case[1:] for case in REFUSED], ids=[c[0] for c in REFUSED])
def test_hostile_body_is_a_422_and_the_connection_serves_the_next_request(healthy_after, body, content_type, loc):
    connection = Connection(healthy_after.port)
    try:
        connection.send_in_background(request_bytes(body, content_type)).join(IO_TIMEOUT_S)
        detail = assert_problem_list(connection.read_answer(), loc)
        assert len(json.dumps(detail)) < 8192, "the 422 must not echo a large input back"
        assert_served(connection.exchange(request_bytes(VALID)))  # same keep-alive connection
    finally:
        connection.close()


@pytest.mark.parametrize(("name", "count"), [("nodes", 16384), ("ranks", 262144)])
def test_a_list_at_its_bound_is_accepted(healthy_after, name, count):
    items = [f"n{i}" for i in range(count)] if name == "nodes" else list(range(count))
    body = json.loads(VALID)
    body["scope"][name] = items
    if name == "ranks":
        body["scope"]["nodes"] = ["worker-01"]
    answer = requests.post(f"{healthy_after.base_url}/v1/attribution", json=body, timeout=IO_TIMEOUT_S)
    assert answer.status_code == 200, answer.text[:300]
    assert len(answer.json()["unattributed_targets"]) == len(body["scope"]["nodes"]) - 1


def test_a_surrogate_pair_escape_is_one_valid_character(healthy_after):
    connection = Connection(healthy_after.port)
    try:
        answer = connection.exchange(request_bytes(valid_text_with(b'"worker-01"', rb'"gpu-\ud83d\ude00"')))
        assert answer.status == 200
        assert answer.json()["attributions"][0]["target"]["name"] == "gpu-\U0001f600"
    finally:
        connection.close()


def test_an_invalid_trace_context_is_ignored(healthy_after):
    for traceparent, tracestate in [
        ("garbage", "a=b"),
        ("00-" + "0" * 32 + "-" + "0" * 16 + "-01", ""),
        ("x" * 4000, ""),
    ]:
        answer = requests.post(
            f"{healthy_after.base_url}/v1/attribution",
            json=SEED_REQUEST,
            headers={"traceparent": traceparent, "tracestate": tracestate},
            timeout=IO_TIMEOUT_S,
        )
        assert answer.status_code == 200, answer.text


@pytest.mark.parametrize("closing", ["half-close", "close"])
def test_a_truncated_body_leaves_the_service_healthy(healthy_after, closing):
    head = b"POST /v1/attribution HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    connection = Connection(healthy_after.port)
    try:
        connection.send(head + b"Content-Length: %d\r\n\r\n" % (len(VALID) + 1000) + VALID[:40])
        if closing == "half-close":
            connection.sock.shutdown(socket.SHUT_WR)  # the client sends no more but still reads
            assert_problem_list(connection.read_answer(), ["body"])
    finally:
        connection.close()


def test_a_slow_sender_is_served_and_keeps_its_connection(healthy_after):
    data = request_bytes(VALID)
    connection = Connection(healthy_after.port)
    try:
        pieces = [data[i : i + 16] for i in range(0, len(data), 16)]
        assert len(pieces) < 100  # bounded: at most a few seconds
        for piece in pieces:
            connection.send(piece)
            time.sleep(0.02)
        assert_served(connection.read_answer())
        assert_served(connection.exchange(request_bytes(VALID)))
    finally:
        connection.close()


def oversized_request(framing: str, size: int) -> bytes:
    """A request whose body of `size` bytes is sent with a Content-Length or chunked."""
    if framing == "content-length":
        return request_bytes(b"x" * size)
    return chunked_request_bytes(iter([b"y" * 65536] * (size // 65536)))


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_over_the_limit_is_a_readable_413_and_the_connection_closes(healthy_after, framing):
    """The worker answers 413 as soon as the declared length (or the chunks read) pass the limit, reads and drops
    what the client is still sending for a moment so the answer is not lost to a reset, and closes."""
    size = LIMIT + 512 * 1024
    data = oversized_request(framing, size)
    connection = Connection(healthy_after.port)
    try:
        sender = connection.send_in_background(data)
        answer = connection.read_answer()
        assert_too_large(answer)
        assert answer.headers.get("connection", "").lower() == "close"
        sender.join(IO_TIMEOUT_S)
        assert connection.is_closed_by_server()
    finally:
        connection.close()


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_requests_reads_the_413_of_a_body_over_the_limit(healthy_after, framing):
    size = LIMIT + 65536
    url = f"{healthy_after.base_url}/v1/attribution"
    headers = {"Content-Type": "application/json"}
    with requests.Session() as session:
        if framing == "content-length":
            answer = session.post(url, data=b"x" * size, headers=headers, timeout=IO_TIMEOUT_S)
        else:
            answer = session.post(
                url, data=iter([b"y" * 65536] * (size // 65536)), headers=headers, timeout=IO_TIMEOUT_S
            )
        assert answer.status_code == 413
        assert set(answer.json()) == {"detail"}
        assert answer.headers["X-Request-ID"]
        again = session.post(url, json=SEED_REQUEST, timeout=IO_TIMEOUT_S)  # the session reuses its connection
        assert again.status_code == 200


def test_content_length_together_with_chunked_is_refused_and_never_processed(healthy_after):
    body = b"5\r\nhello\r\n0\r\n\r\n"
    head = b"POST /v1/attribution HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    connection = Connection(healthy_after.port)
    try:
        answer = connection.exchange(head + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + body)
        assert 400 <= answer.status < 500 and answer.status != 413
        assert connection.is_closed_by_server()
    finally:
        connection.close()


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_requests_reads_the_413_of_a_body_far_over_the_limit(healthy_after, framing):
    size = 6 * LIMIT
    data = b"x" * size if framing == "content-length" else iter([b"y" * 65536] * (size // 65536))
    answer = requests.post(
        f"{healthy_after.base_url}/v1/attribution",
        data=data,
        headers={"Content-Type": "application/json"},
        timeout=IO_TIMEOUT_S,
    )
    assert answer.status_code == 413
    assert set(answer.json()) == {"detail"}


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_413_far_over_the_limit_is_readable_and_announces_the_close(healthy_after, framing):
    size = 6 * LIMIT
    data = oversized_request(framing, size)
    connection = Connection(healthy_after.port)
    try:
        connection.send_in_background(data)
        answer = connection.read_answer()
        assert_too_large(answer)
        assert answer.headers.get("connection", "").lower() == "close"
    finally:
        connection.close()


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_413_while_the_client_still_sends_is_readable_and_the_next_connection_is_served(healthy_after, framing):
    """The worker answers 413 from the declared length, or as soon as a chunked body passes the limit, and closes
    while the client is still sending (18 times the limit): the answer is still readable, and the next connection
    is served."""
    size = 18 * LIMIT
    data = oversized_request(framing, size)
    connection = Connection(healthy_after.port)
    try:
        connection.send_in_background(data)
        assert_too_large(connection.read_answer())
    finally:
        connection.close()
    fresh = Connection(healthy_after.port)
    try:
        assert_served(fresh.exchange(request_bytes(VALID)))
    finally:
        fresh.close()

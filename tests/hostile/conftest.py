"""Hostile clients against real gunicorn on 127.0.0.1: raw sockets that misbehave, and the answers they get."""

from __future__ import annotations

import json
import socket
import weakref
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.fakes import FAKE_PROVIDER as FAKE
from tests.gunicorn_process import Gunicorn

# Short bounds so each case ends quickly; the defaults are in app/settings.py.
FAST_BOUNDS = {
    "ATTRIBUTION_PROVIDER": FAKE,
    "ATTRIBUTION_WORKERS": "1",
    "ATTRIBUTION_THREADS": "4",
    "ATTRIBUTION_HEADER_TIMEOUT_SECONDS": "2",
    "ATTRIBUTION_BODY_TIMEOUT_SECONDS": "3",
    "ATTRIBUTION_BODY_MIN_RATE": "200",
    "ATTRIBUTION_MAX_BODY_BYTES": str(64 * 1024),
}
# Generous: a case waits this long for an answer it expects; a server that never answers fails the case.
ANSWER_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gunicorn]:
    started = Gunicorn(FAST_BOUNDS, tmp_path_factory.mktemp("hostile") / "gunicorn.log")
    try:
        started.wait_ready()
        yield started
    finally:
        started.stop()


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    closed: bool  # the server closed the connection after the answer

    def json(self) -> object:
        return json.loads(self.body)


def connect(port: int, timeout: float = ANSWER_TIMEOUT_S) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.settimeout(timeout)
    return sock


# Bytes read past one answer (the next pipelined answer), kept for the next read_answer on the same socket.
_read_ahead: weakref.WeakKeyDictionary[socket.socket, bytes] = weakref.WeakKeyDictionary()


def read_answer(sock: socket.socket) -> Answer:
    """One HTTP/1.1 response read from `sock` (skipping 1xx), then whether the server closed the connection."""
    data = _read_ahead.pop(sock, b"")
    while True:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError(f"closed before a complete answer: {data!r}")
            data += chunk
        head, _, data = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        if 100 <= status < 200:
            continue
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        break
    length = int(headers.get("content-length", "0"))
    while len(data) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed inside the answer's body")
        data += chunk
    body = data[:length]
    if data[length:]:
        _read_ahead[sock] = data[length:]
    closed = False
    if headers.get("connection", "").lower() == "close":
        try:
            closed = sock.recv(1) == b""
        except ConnectionResetError:
            closed = True
    return Answer(status, headers, body, closed)


def exchange(port: int, raw: bytes) -> Answer:
    with connect(port) as sock:
        sock.sendall(raw)
        return read_answer(sock)


def assert_json_refusal(answer: Answer, status: int) -> None:
    """A 4xx the Adapter gives itself: the contract's {"detail": str}, an X-Request-ID, and the connection closed."""
    assert answer.status == status, (answer.status, answer.body)
    assert answer.headers["content-type"] == "application/json"
    assert isinstance(answer.json(), dict) and isinstance(answer.json()["detail"], str)
    assert len(answer.headers["x-request-id"]) == 32
    assert answer.closed

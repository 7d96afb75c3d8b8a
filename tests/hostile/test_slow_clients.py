"""Slow clients: a connection that does not finish its headers or body in time, or trickles its body, is answered
408 and closed; while many are held, /healthz and valid requests are served."""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from app.openapi import SEED_EXAMPLE
from tests.fakes import FAKE_PROVIDER as FAKE
from tests.gunicorn_process import Gunicorn
from tests.hostile.conftest import ANSWER_TIMEOUT_S, assert_json_refusal, connect, read_answer

# A bounded number of slow sends; a server without read bounds lets all of them through.
MAX_TRICKLES = 60


def _trickle_until_answered(sock: socket.socket, pieces: Iterator[bytes], pause_s: float) -> int:
    """Send one piece per pause until the server answers (or the pieces run out); how many pieces were sent."""
    sent = 0
    for piece in pieces:
        readable = _wait_readable(sock, pause_s)
        if readable:
            return sent
        try:
            sock.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            return sent
        sent += 1
    return sent


def _wait_readable(sock: socket.socket, seconds: float) -> bool:
    return bool(select.select([sock], [], [], seconds)[0])


def test_headers_that_never_end_are_answered_408_and_closed(server):
    with connect(server.port) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        headers = (b"X-Slow-%d: v\r\n" % i for i in range(MAX_TRICKLES))
        sent = _trickle_until_answered(sock, headers, pause_s=0.25)
        assert sent < MAX_TRICKLES, "the server kept reading headers with no end"
        answer = read_answer(sock)
    assert_json_refusal(answer, 408)


def test_a_kept_alive_connection_whose_next_request_stalls_is_answered_408_and_closed(server):
    # The next request on a kept-alive connection is read as soon as its first bytes come: the rest may come in
    # later pieces, and one that stops is timed out as on a new connection.
    with connect(server.port) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_answer(sock).status == 200
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        assert not _wait_readable(sock, 0.3)
        sock.sendall(b"Host: x\r\n\r\n")
        assert read_answer(sock).status == 200
        sock.sendall(b"GET /healthz HT")
        answer = read_answer(sock)
    assert_json_refusal(answer, 408)


def test_one_byte_then_silence_is_answered_408_and_closed(server):
    with connect(server.port) as sock:
        sock.sendall(b"G")
        answer = read_answer(sock)  # the socket timeout (generous) fails the case if nothing comes
    assert_json_refusal(answer, 408)


def test_a_connection_that_sends_nothing_is_closed(server):
    with connect(server.port) as sock:
        answer = read_answer(sock)
    assert_json_refusal(answer, 408)


def test_a_trickled_body_is_answered_408_and_closed(server):
    with connect(server.port) as sock:
        sock.sendall(
            b"POST /v1/attribution HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 5000\r\n\r\n"
        )
        sent = _trickle_until_answered(sock, (b"{" for _ in range(MAX_TRICKLES)), pause_s=0.25)
        assert sent < MAX_TRICKLES, "the server kept reading a body sent one byte at a time"
        answer = read_answer(sock)
    assert_json_refusal(answer, 408)
    assert answer.json()["detail"] in ("Request body arrives too slowly", "Request body not received in time")


def test_a_body_that_stops_is_answered_408_and_closed(server):
    with connect(server.port) as sock:
        sock.sendall(
            b"POST /v1/attribution HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n{"
        )
        answer = read_answer(sock)
    assert_json_refusal(answer, 408)


HELD = 64


@pytest.fixture
def roomy_server(tmp_path: Path) -> Iterator[Gunicorn]:
    """Default read bounds (long enough that the slow connections are still held while the checks run)."""
    server = Gunicorn({"ATTRIBUTION_PROVIDER": FAKE, "ATTRIBUTION_WORKERS": "1"}, tmp_path / "gunicorn.log")
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def _still_open(sock: socket.socket) -> bool:
    try:
        return sock.recv(1, socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def _worker_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_64_slow_connections_do_not_starve_healthz_or_valid_requests(roomy_server):
    (worker,) = roomy_server.worker_pids()
    held: list[socket.socket] = []
    kinds = (
        b"G",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Never: ends\r\n",
        b"POST /v1/attribution HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n{",
    )
    try:
        for i in range(HELD):
            sock = connect(roomy_server.port)
            sock.sendall(kinds[i % len(kinds)])
            held.append(sock)
        health = requests.get(f"{roomy_server.base_url}/healthz", timeout=ANSWER_TIMEOUT_S)
        valid = requests.post(f"{roomy_server.base_url}/v1/attribution", json=SEED_EXAMPLE, timeout=ANSWER_TIMEOUT_S)
        # Both were answered while every slow connection was still held open by the server.
        still_held = sum(_still_open(sock) for sock in held)
    finally:
        for sock in held:
            sock.close()
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert valid.status_code == 200 and valid.json()["attributions"]
    assert still_held == HELD


def test_bodies_held_by_many_connections_stay_within_the_workers_buffer(server):
    """Bodies being read are held in memory: past 2 bodies per thread (here 4 threads of 64 KiB) a request gets 503
    at once, and the worker's resident memory grows by no more than that buffer."""
    (worker,) = server.worker_pids()
    before = _worker_rss_kib(worker)
    held: list[socket.socket] = []
    answers = []
    try:
        for _ in range(12):  # 12 x 60 KiB against a 512 KiB buffer
            sock = connect(server.port)
            sock.sendall(
                b"POST /v1/attribution HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 65536\r\n\r\n" + b" " * 61440
            )
            held.append(sock)
        readable, _, _ = select.select(held, [], [], 1.0)
        answers = [read_answer(sock) for sock in readable]
        after = _worker_rss_kib(worker)
    finally:
        for sock in held:
            sock.close()
    busy = [answer for answer in answers if answer.status == 503]
    assert busy, f"every body was buffered, past the worker's buffer: {answers}"
    for answer in busy:
        assert_json_refusal(answer, 503)
    assert after - before < 16 * 1024, (before, after)

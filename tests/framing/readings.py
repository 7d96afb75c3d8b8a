"""Where a server reads the requests of a byte stream to begin and end: its `Reading` of one case of the corpus."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass

import h11

ANSWER_TIMEOUT_S = 15.0
ECHO_TYPE = "application/x-echo"


@dataclass(frozen=True)
class Reading:
    """The requests a server read from the stream, in order (method, target, body), and how it stopped: `refused`
    (an error answer, or the parser's error), or `end` (it read everything it was sent, or closed)."""

    requests: tuple[tuple[str, str, str], ...]
    stop: str

    def describe(self) -> str:
        return f"{list(self.requests)} then {self.stop}"


def answers_reading(data: bytes) -> Reading:
    """The reading shown by a stream of answers of the echo app (tests/framing/echo_app.py or its Node.js twin):
    each 200 echo names a request read; any other final answer is a refusal, after which nothing counts."""
    requests: list[tuple[str, str, str]] = []
    while data:
        head, sep, data = data.partition(b"\r\n\r\n")
        if not sep:
            break
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        fields = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        if 100 <= status < 200:
            continue
        length = int(fields.get("content-length", "0"))
        body, data = data[:length], data[length:]
        if status != 200 or fields.get("content-type") != ECHO_TYPE:
            return Reading(tuple(requests), "refused")
        echo = json.loads(body)
        requests.append((echo["method"], echo["target"], echo["body"]))
    return Reading(tuple(requests), "end")


def worker_reading(port: int, raw: bytes) -> Reading:
    """`raw` sent to a server on 127.0.0.1 (the client then sends no more but still reads), its answers read until
    it closes the connection."""
    received = bytearray()
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_TIMEOUT_S) as sock:
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
    return answers_reading(bytes(received))


def h11_reading(raw: bytes) -> Reading:
    """h11's reading of `raw` followed by the end of the stream, as a server that answers each request at once."""
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(raw)
    conn.receive_data(b"")
    requests: list[tuple[str, str, str]] = []
    current: tuple[str, str] | None = None
    body = bytearray()
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError:
            return Reading(tuple(requests), "refused")
        if isinstance(event, h11.Request):
            current, body = (event.method.decode("latin-1"), event.target.decode("latin-1")), bytearray()
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert current is not None
            requests.append((*current, body.decode("latin-1")))
            # A 2xx would accept a CONNECT's tunnel: the echo app's twin declines it as the worker does.
            status = 405 if current[0] == "CONNECT" else 200
            conn.send(h11.Response(status_code=status, headers=[("Content-Length", "0")]))
            conn.send(h11.EndOfMessage())
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return Reading(tuple(requests), "end")
            conn.start_next_cycle()
        else:  # NEED_DATA, PAUSED or ConnectionClosed: nothing more is read
            return Reading(tuple(requests), "end")


def compare(worker: Reading, reference: Reading) -> str:
    """`same`, `stricter` (the worker read the reference's first requests, then refused or stopped where the
    reference read more) or `DISAGREE` (the worker read a request the reference did not read as it did)."""
    if worker.requests != reference.requests[: len(worker.requests)]:
        return "DISAGREE"
    return "stricter" if len(worker.requests) < len(reference.requests) else "same"

"""The gunicorn worker class: a gthread worker whose event loop reads each whole request before a thread sees it.

gunicorn's gthread worker hands a connection to a request thread as soon as a byte arrives, and the thread then
blocks reading headers and body: a few clients sending slowly hold every thread (16 such connections left
/healthz unanswered with 1 worker of 8 threads, bench/hostile.py). Here the worker's own selector loop reads the
request line, the headers and the whole body without blocking, within bounds set by ServerSettings:

- the request line and headers must end within `header_timeout` seconds, and fit the bounds of app/framing.py;
- the body must end within `body_timeout` seconds of the headers, and arrive at `body_min_rate` bytes/s on average
  (checked from RATE_GRACE_SECONDS on);
- a declared Content-Length over `max_body_bytes` is refused at once, a chunked body as soon as it passes it;
- all bodies being read together stay under BUFFER_BODIES_PER_THREAD x threads x `max_body_bytes` (503 past it).

Where a request begins and ends is llhttp's reading (app/framing.py), never a hand-written one. Only a complete
request goes to the thread pool, from a buffer: a request thread never waits on a client. The worker answers what
it refuses itself, as JSON in the contract's `{"detail": str}` shape with an X-Request-ID, and closes the
connection. gunicorn's parser reads only the head as llhttp read it (with the body's length in place of the
client's framing); the body reaches the app as one bytes object (`HeldBody`), never copied through the parser's
buffers again (for a 4 MiB body those copies cost more than reading it from the socket).
"""

from __future__ import annotations

import errno
import json
import selectors
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

from gunicorn import http
from gunicorn.http import errors as http_errors
from gunicorn.workers.gthread import TConn, ThreadWorker
from prometheus_client import Counter

from app.body import HeldBody
from app.framing import Framing, Message, Refusal
from app.logs import new_request_id
from app.settings import ServerSettings, Settings, SettingsError

RATE_GRACE_SECONDS = 1.0
LINGER_SECONDS = 2.0
# All connections of a worker together hold at most this many largest bodies per thread while they are read;
# past it a request is answered 503 at once, so memory stays bounded whatever the number of connections.
BUFFER_BODIES_PER_THREAD = 2
RECV_BYTES = 64 * 1024
# Once the head says how long the body is, one recv takes up to this much of it: a large body then needs a few
# turns of the loop rather than one per 64 KiB.
RECV_BODY_BYTES = 1024 * 1024

# Why the worker answered a request itself: a closed set, the `reason` label of the counter below.
REASONS = (
    "header_timeout",
    "body_timeout",
    "body_rate",
    "bad_request",
    "uri_too_long",
    "header_too_large",
    "body_too_large",
    "bad_framing",
    "method",
    "parser",
    "busy",
)
REFUSED = Counter(
    "attribution_requests_refused",
    "Requests the worker answered itself, before the app, by reason.",
    ["reason"],
)

_REASON_PHRASES = {
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    413: "Content Too Large",
    414: "URI Too Long",
    417: "Expectation Failed",
    503: "Service Unavailable",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
}


def error_response(status: int, detail: str, request_id: str, headers: list[tuple[str, str]] | None = None) -> bytes:
    body = json.dumps({"detail": detail}).encode()
    extra = "".join(f"{name}: {value}\r\n" for name, value in headers or [])
    head = (
        f"HTTP/1.1 {status} {_REASON_PHRASES.get(status, 'Error')}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"X-Request-ID: {request_id}\r\n"
        f"{extra}"
        "Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


@dataclass
class Limits:
    header_timeout: float
    body_timeout: float
    body_min_rate: int
    max_body_bytes: int
    buffer_bytes: int


@dataclass
class Reading:
    """A connection whose next request the event loop is reading."""

    conn: TConn
    framing: Framing
    started: float
    body_started: float = 0.0
    body_received: int = 0
    held: int = 0
    continued: bool = False  # a 100 Continue was sent for the request being read


def _send_nowait(conn: TConn, data: bytes) -> None:
    try:
        conn.sock.send(data)
    except OSError:
        pass


class AdapterWorker(ThreadWorker):
    """gthread with a reading loop: see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        try:
            server, app = ServerSettings.from_env(), Settings.from_env()
        except SettingsError:  # the config checked both before any worker was forked
            server, app = ServerSettings(), Settings(provider="")
        self.limits = Limits(
            header_timeout=server.header_timeout,
            body_timeout=server.body_timeout,
            body_min_rate=server.body_min_rate,
            max_body_bytes=app.max_body_bytes,
            buffer_bytes=BUFFER_BODIES_PER_THREAD * server.threads * app.max_body_bytes,
        )
        self.buffered = 0
        self.reading: dict[int, Reading] = {}
        self.closing: dict[int, tuple[TConn, float]] = {}

    # --- entering the reading loop -----------------------------------------------------------------------------

    def accept(self, listener: Any) -> None:
        try:
            client_sock, client_addr = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        conn = TConn(self.cfg, client_sock, client_addr, listener.getsockname())  # non-blocking
        self._start_reading(conn)

    def on_client_socket_readable(self, conn: TConn, client: Any) -> None:
        """A kept-alive connection has its next request's bytes: they are read now, not after another turn of the
        loop, and the socket stays registered (only the callback changes) until the request is whole."""
        self.keepalived_conns.remove(conn)
        state = Reading(conn=conn, framing=conn.framing, started=time.monotonic())
        self.reading[id(conn)] = state
        self.poller.modify(client, selectors.EVENT_READ, partial(self._on_readable, state))
        self._on_readable(state, client)

    def _start_reading(self, conn: TConn) -> None:
        """Read the connection's next request: a new connection, or one whose framing holds more after a request."""
        conn.sock.setblocking(False)
        if getattr(conn, "framing", None) is None:
            conn.framing = Framing(self.limits.max_body_bytes)
        state = Reading(conn=conn, framing=conn.framing, started=time.monotonic())
        self.reading[id(conn)] = state
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, state))
        if state.framing.ready:
            self._advance(state)

    # --- reading -----------------------------------------------------------------------------------------------

    def _on_readable(self, state: Reading, _sock: Any) -> None:
        message = state.framing.message
        size = RECV_BYTES
        if message is not None and message.head_done and message.content_length:
            size = min(max(RECV_BYTES, message.content_length - message.body_size), RECV_BODY_BYTES)
        try:
            data = state.conn.sock.recv(size)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            truncated = state.framing.truncated()
            if truncated is not None:
                # Half-closed inside a body of declared length: the app answers the truncated body (a 422).
                self._hand_over(state, truncated)
            else:
                self._drop(state)
            return
        if self.buffered + len(data) > self.limits.buffer_bytes:
            self._refuse(state, Refusal(503, "busy", "Too many request bodies in flight; retry later"))
            return
        state.held += len(data)
        self.buffered += len(data)
        state.framing.feed(data)
        self._advance(state)

    def _advance(self, state: Reading) -> None:
        framing = state.framing
        if framing.ready:
            first = framing.ready.popleft()
            if isinstance(first, Refusal):
                self._refuse(state, first)
            else:
                self._hand_over(state, first)
            return
        message = framing.message
        if message is None or not message.head_done:
            return
        if not state.body_started:
            state.body_started = time.monotonic()
        state.body_received = message.body_size
        if message.expect_continue and not message.body_size and not state.continued:
            # The client waits for this before it sends the body; Expect is not handed on.
            state.continued = True
            _send_nowait(state.conn, b"HTTP/1.1 100 Continue\r\n\r\n")

    def _hand_over(self, state: Reading, message: Message) -> None:
        """A complete request: to the thread pool; what the framing read after it waits for the next request.

        gunicorn's parser gets the head only; the body, already whole, reaches the app as the request's
        `wsgi.input` (a HeldBody, see `handle_request`) instead of being parsed out of the parser's buffer again.
        """
        conn = state.conn
        self._leave(state)
        if conn.parser is None:
            conn.parser = http.get_parser(self.cfg, conn.sock, conn.client)
        conn.initialized = True
        conn.data_ready = True
        conn.parser.unreader.unread(message.head + b"\r\n\r\n")
        conn.held_body = message.body
        self.enqueue_req(conn)

    def handle_request(self, req: Any, conn: TConn) -> Any:
        body = getattr(conn, "held_body", None)
        if body is not None:
            conn.held_body = None
            # The head's Content-Length is the body's length; the parser discards what the app leaves unread from
            # this object, never from the socket.
            req.body = HeldBody(body)
        return super().handle_request(req, conn)

    def finish_request(self, conn: TConn, fs: Any) -> None:
        framing = getattr(conn, "framing", None)
        if (
            framing is not None
            and (framing.ready or framing.message is not None)
            and not fs.cancelled()
            and fs.exception() is None
            and fs.result() is True
            and self.alive
        ):
            self._start_reading(conn)  # a pipelined next request, whole or begun
            return
        super().finish_request(conn, fs)

    # --- refusing and closing ----------------------------------------------------------------------------------

    def _unknown_method(self, refusal: Refusal) -> None:
        """The contract's answer to a method the app does not take: 405 with Allow on a path the app serves, 404
        elsewhere. Given here, so the app (and its metrics' `method` label) only ever sees METHODS."""
        url_map = getattr(self.wsgi, "url_map", None)
        if url_map is None:
            return
        path = refusal.target.split(b"?", 1)[0].decode("latin-1")
        try:
            allowed = url_map.bind("localhost").allowed_methods(path)
        except Exception:  # noqa: BLE001 - an odd target keeps the 501
            return
        if allowed:
            refusal.status, refusal.detail = 405, "Method Not Allowed"
            refusal.headers = [("Allow", ", ".join(sorted(allowed)))]
        else:
            refusal.status, refusal.detail = 404, "Not Found: no such path"

    def _refuse(self, state: Reading, refusal: Refusal) -> None:
        if refusal.reason == "method":
            self._unknown_method(refusal)
        request_id = new_request_id()
        REFUSED.labels(reason=refusal.reason).inc()
        self.log.warning(
            "refused: %d %s (reason=%s, request_id=%s)", refusal.status, refusal.detail, refusal.reason, request_id
        )
        _send_nowait(state.conn, error_response(refusal.status, refusal.detail, request_id, refusal.headers))
        self._linger(state)

    def _linger(self, state: Reading) -> None:
        """Stop writing, read and drop what the client still sends for a moment so the answer is not lost to a
        reset, then close."""
        conn = state.conn
        self._leave(state)
        try:
            conn.sock.shutdown(1)  # SHUT_WR
        except OSError:
            pass
        self.closing[id(conn)] = (conn, time.monotonic() + LINGER_SECONDS)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_closing_readable, conn))

    def _on_closing_readable(self, conn: TConn, _sock: Any) -> None:
        try:
            data = conn.sock.recv(RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close(conn, self.closing)

    def _leave(self, state: Reading) -> None:
        self.poller.unregister(state.conn.sock)
        del self.reading[id(state.conn)]
        self.buffered -= state.held
        state.held = 0

    def _drop(self, state: Reading) -> None:
        self._leave(state)
        self._close(state.conn, {})

    def _close(self, conn: TConn, table: dict[int, Any]) -> None:
        table.pop(id(conn), None)
        try:
            self.poller.unregister(conn.sock)
        except (KeyError, ValueError, OSError):
            pass
        self.nr_conns -= 1
        conn.close()

    def murder_pending(self) -> None:
        """Called by the loop about once a second: enforce the read deadlines and rate, end lingering closes."""
        super().murder_pending()
        now = time.monotonic()
        for state in list(self.reading.values()):
            refusal = self._overdue(state, now)
            if refusal is not None:
                self._refuse(state, refusal)
        for conn, deadline in list(self.closing.values()):
            if now >= deadline:
                self._close(conn, self.closing)

    def _overdue(self, state: Reading, now: float) -> Refusal | None:
        limits = self.limits
        if not state.body_started:
            if now - state.started >= limits.header_timeout:
                return Refusal(408, "header_timeout", "Request headers not received in time")
            return None
        elapsed = now - state.body_started
        if elapsed >= limits.body_timeout:
            return Refusal(408, "body_timeout", "Request body not received in time")
        if limits.body_min_rate and elapsed >= RATE_GRACE_SECONDS:
            if state.body_received < limits.body_min_rate * elapsed:
                return Refusal(408, "body_rate", "Request body arrives too slowly")
        return None

    # --- errors gunicorn's parser still finds in the thread ---------------------------------------------------

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        status = _parser_status(exc)
        request_id = new_request_id()
        if status < 500:
            REFUSED.labels(reason="parser").inc()
            self.log.warning("refused by the parser: %d %s (request_id=%s)", status, exc, request_id)
            detail = str(exc)[:200] or _REASON_PHRASES.get(status, "Bad Request")
        else:
            self.log.exception("Error handling request (request_id=%s)", request_id)
            detail = "Internal server error"
        try:
            client.sendall(error_response(status, detail, request_id))
        except OSError:
            pass


_PARSER_STATUS: list[tuple[type[BaseException], int]] = [
    (http_errors.LimitRequestLine, 414),
    (http_errors.LimitRequestHeaders, 431),
    (http_errors.ExpectationFailed, 417),
    (http_errors.ForbiddenProxyRequest, 403),
    (http_errors.UnsupportedTransferCoding, 501),
    (http_errors.ConfigurationProblem, 500),
    (http_errors.ParseException, 400),
]


def _parser_status(exc: BaseException) -> int:
    for kind, status in _PARSER_STATUS:
        if isinstance(exc, kind):
            return status
    return 500

"""The gunicorn worker class: a gthread worker whose event loop reads each whole request before a thread sees it.

gunicorn's gthread worker hands a connection to a request thread as soon as a byte arrives, and the thread then
blocks reading headers and body: a few clients sending slowly hold every thread (16 such connections left
/healthz unanswered with 1 worker of 8 threads, bench/hostile.py). Here the worker's own selector loop reads the
request line, the headers and the whole body without blocking, within bounds set by ServerSettings:

- the request line and headers must end within `header_timeout` seconds, and fit MAX_HEAD_BYTES;
- the body must end within `body_timeout` seconds of the headers, and arrive at `body_min_rate` bytes/s on average
  (checked from RATE_GRACE_SECONDS on);
- a declared Content-Length over `max_body_bytes` is refused at once, a chunked body as soon as it passes it;
- all bodies being read together stay under BUFFER_BODIES_PER_THREAD x threads x `max_body_bytes` (503 past it).

Only a complete request goes to the thread pool, from a buffer: a request thread never waits on a client. The
worker answers what it refuses itself, as JSON in the contract's `{"detail": str}` shape with an X-Request-ID, and
closes the connection. A chunked body is decoded here and handed on with a Content-Length. gunicorn's parser reads
only the head; the body reaches the app as one bytes object (`HeldBody`), never copied through the parser's buffers
again (for a 4 MiB body those copies cost more than reading it from the socket).
"""

from __future__ import annotations

import errno
import json
import re
import selectors
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from gunicorn import http
from gunicorn.http import errors as http_errors
from gunicorn.workers.gthread import TConn, ThreadWorker
from prometheus_client import Counter

from app.body import HeldBody
from app.logs import new_request_id
from app.settings import ServerSettings, Settings, SettingsError

# gunicorn's own parser limits (limit_request_line, limit_request_field_size, limit_request_fields defaults):
# the loop refuses past them first, so the parser in the thread never meets a head it would refuse for size.
MAX_REQUEST_LINE = 4094
MAX_FIELD_LINE = 8190
MAX_FIELDS = 100
MAX_HEAD_BYTES = 32 * 1024
MAX_CHUNK_LINE = 1024
MAX_TRAILER_BYTES = 8 * 1024
RATE_GRACE_SECONDS = 1.0
LINGER_SECONDS = 2.0
# All connections of a worker together hold at most this many largest bodies per thread while they are read;
# past it a request is answered 503 at once, so memory stays bounded whatever the number of connections.
BUFFER_BODIES_PER_THREAD = 2
RECV_BYTES = 64 * 1024
# Once the head says how long the body is, one recv takes up to this much of it: a large body then needs a few
# turns of the loop rather than one per 64 KiB.
RECV_BODY_BYTES = 1024 * 1024

# Methods the app may see. Any other token is answered here as the app would (405 with Allow on a path it serves,
# 404 elsewhere; 501 if the app has no URL map), so the exporter's `method` label stays within this closed set.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"})
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TARGET = re.compile(rb"[\x21-\x7e]+")
_VERSION = re.compile(rb"HTTP/1\.[01]")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")

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


class Refusal(Exception):
    """The request cannot be served: answer `status` with `detail` and close."""

    def __init__(self, status: int, reason: str, detail: str, target: bytes = b"") -> None:
        super().__init__(detail)
        self.status = status
        self.reason = reason
        self.detail = detail
        self.target = target
        self.headers: list[tuple[str, str]] = []


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


class ChunkedBody:
    """An incremental decoder of a chunked body (RFC 9112 section 7.1); Refusal on bad framing or size."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.decoded = bytearray()
        self.state = "size"
        self.need = 0
        self.trailer_bytes = 0
        self.done = False

    def feed(self, raw: bytearray) -> None:
        """Consume what it can from the front of `raw`; what is left after the end stays in `raw`."""
        while not self.done:
            if self.state == "data":
                if len(raw) < self.need + 2:
                    return
                if raw[self.need : self.need + 2] != b"\r\n":
                    raise Refusal(400, "bad_framing", "Malformed chunked body: chunk data not followed by CRLF")
                self.decoded += raw[: self.need]
                del raw[: self.need + 2]
                self.state = "size"
                continue
            end = raw.find(b"\r\n")
            if end < 0:
                limit = MAX_CHUNK_LINE if self.state == "size" else MAX_TRAILER_BYTES
                if len(raw) > limit:
                    raise Refusal(400, "bad_framing", "Malformed chunked body: line too long")
                return
            line = bytes(raw[:end])
            del raw[: end + 2]
            if self.state == "size":
                size_text = line.split(b";", 1)[0].rstrip(b" \t")
                if not _HEX.fullmatch(size_text):
                    raise Refusal(400, "bad_framing", "Malformed chunked body: invalid chunk size")
                size = int(size_text, 16)
                if size == 0:
                    self.state = "trailer"
                elif len(self.decoded) + size > self.max_bytes:
                    raise Refusal(413, "body_too_large", "Request body is larger than the configured limit")
                else:
                    self.state, self.need = "data", size
            else:  # trailer section: lines until an empty one
                self.trailer_bytes += len(line) + 2
                if self.trailer_bytes > MAX_TRAILER_BYTES:
                    raise Refusal(400, "bad_framing", "Malformed chunked body: trailer section too large")
                if not line:
                    self.done = True
                elif b":" not in line:
                    raise Refusal(400, "bad_framing", "Malformed chunked body: invalid trailer line")


@dataclass
class Reading:
    """A connection whose next request the event loop is reading."""

    conn: TConn
    started: float
    buf: bytearray = field(default_factory=bytearray)
    head: bytes | None = None
    content_length: int = 0
    chunked: ChunkedBody | None = None
    body_started: float = 0.0
    body_received: int = 0
    held: int = 0


def _head_fields(head: bytes) -> tuple[bytes, list[tuple[bytes, bytes]], list[bytes]]:
    """The request line, (lower-case name, value) pairs and raw lines of a head without its final CRLFCRLF."""
    lines = head.split(b"\r\n")
    request_line, raw_fields = lines[0], lines[1:]
    if len(raw_fields) > MAX_FIELDS:
        raise Refusal(431, "header_too_large", "Too many header fields")
    fields: list[tuple[bytes, bytes]] = []
    for line in raw_fields:
        if len(line) > MAX_FIELD_LINE:
            raise Refusal(431, "header_too_large", "A header field is larger than the limit")
        name, sep, value = line.partition(b":")
        if not sep or not _TOKEN.fullmatch(name):
            raise Refusal(400, "bad_request", "Invalid header field")
        fields.append((name.lower(), value.strip(b" \t")))
    return request_line, fields, raw_fields


def parse_head(head: bytes, max_body_bytes: int) -> tuple[bytes, int, bool, bool]:
    """Check a complete head; return it as handed on (Expect and Transfer-Encoding dropped), its body length,
    whether the body is chunked and whether the client expects a 100 Continue. Refusal for what the loop refuses."""
    request_line, fields, raw_fields = _head_fields(head)
    if len(request_line) > MAX_REQUEST_LINE:
        raise Refusal(414, "uri_too_long", "Request line is larger than the limit")
    parts = request_line.split(b" ")
    if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not _TARGET.fullmatch(parts[1]):
        raise Refusal(400, "bad_request", "Invalid request line")
    if not _VERSION.fullmatch(parts[2]):
        raise Refusal(400, "bad_request", "Unsupported HTTP version")
    if parts[0].decode("ascii") not in METHODS:
        raise Refusal(501, "method", "Method Not Implemented", target=parts[1])
    lengths = {value for name, value in fields if name == b"content-length"}
    codings = [value for name, value in fields if name == b"transfer-encoding"]
    if lengths and codings:
        raise Refusal(400, "bad_framing", "Content-Length and Transfer-Encoding must not both be sent")
    expect_continue = any(name == b"expect" and value.lower() == b"100-continue" for name, value in fields)
    keep = [line for line in raw_fields if line.partition(b":")[0].strip().lower() not in (b"expect",)]
    if codings:
        tokens = [token.strip().lower() for value in codings for token in value.split(b",")]
        if tokens != [b"chunked"] or parts[2] != b"HTTP/1.1":
            raise Refusal(400, "bad_framing", "Only Transfer-Encoding: chunked is supported")
        keep = [line for line in keep if line.partition(b":")[0].strip().lower() != b"transfer-encoding"]
        return b"\r\n".join([request_line, *keep]), 0, True, expect_continue
    length = 0
    if lengths:
        if len(lengths) != 1 or not next(iter(lengths)).isdigit() or len(next(iter(lengths))) > 18:
            raise Refusal(400, "bad_framing", "Invalid Content-Length")
        length = int(next(iter(lengths)))
        if length > max_body_bytes:
            raise Refusal(413, "body_too_large", "Request body is larger than the configured limit")
    return b"\r\n".join([request_line, *keep]), length, False, expect_continue


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
        self._start_reading(conn, b"")

    def on_client_socket_readable(self, conn: TConn, client: Any) -> None:
        """A kept-alive connection has its next request's bytes: they are read now, not after another turn of the
        loop, and the socket stays registered (only the callback changes) until the request is whole."""
        self.keepalived_conns.remove(conn)
        state = Reading(conn=conn, started=time.monotonic())
        self.reading[id(conn)] = state
        self.poller.modify(client, selectors.EVENT_READ, partial(self._on_readable, state))
        self._on_readable(state, client)

    def _start_reading(self, conn: TConn, data: bytes) -> None:
        conn.sock.setblocking(False)
        state = Reading(conn=conn, started=time.monotonic(), buf=bytearray(data))
        self.reading[id(conn)] = state
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, state))
        if data:
            self._advance(state)

    # --- reading -----------------------------------------------------------------------------------------------

    def _on_readable(self, state: Reading, _sock: Any) -> None:
        size = RECV_BYTES
        if state.head is not None and state.chunked is None:
            size = min(max(RECV_BYTES, state.content_length - len(state.buf)), RECV_BODY_BYTES)
        try:
            data = state.conn.sock.recv(size)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            if state.head is not None and state.chunked is None:
                # Half-closed inside a body of declared length: the app answers the truncated body (a 422); the
                # parser in the thread meets the end of the stream at once, never a wait.
                self._hand_over(state, bytes(state.buf))
            else:
                self._drop(state)
            return
        if self.buffered + len(data) > self.limits.buffer_bytes:
            self._refuse(state, Refusal(503, "busy", "Too many request bodies in flight; retry later"))
            return
        state.buf += data
        state.held += len(data)
        self.buffered += len(data)
        if state.head is not None:
            state.body_received += len(data)
        self._advance(state)

    def _advance(self, state: Reading) -> None:
        try:
            if state.head is None:
                end = state.buf.find(b"\r\n\r\n")
                if end < 0:
                    self._check_partial_head(state.buf)
                    return
                if end + 4 > MAX_HEAD_BYTES:
                    self._check_partial_head(state.buf[:end])
                    raise Refusal(431, "header_too_large", "Request headers are larger than the limit")
                head, length, chunked, expect_continue = parse_head(bytes(state.buf[:end]), self.limits.max_body_bytes)
                del state.buf[: end + 4]
                state.head = head
                state.content_length = length
                state.chunked = ChunkedBody(self.limits.max_body_bytes) if chunked else None
                state.body_started = time.monotonic()
                state.body_received = len(state.buf)
                if (length or chunked) and expect_continue and not state.buf:
                    # The client waits for this before it sends the body; Expect is not handed on.
                    _send_nowait(state.conn, b"HTTP/1.1 100 Continue\r\n\r\n")
            if state.chunked is not None:
                state.chunked.feed(state.buf)
                if state.chunked.done:
                    self._hand_over(state, bytes(state.chunked.decoded))
            elif len(state.buf) >= state.content_length:
                if len(state.buf) == state.content_length:
                    body, state.buf = bytes(state.buf), bytearray()
                else:
                    with memoryview(state.buf) as view:
                        body = bytes(view[: state.content_length])
                    del state.buf[: state.content_length]
                self._hand_over(state, body)
        except Refusal as refusal:
            self._refuse(state, refusal)

    @staticmethod
    def _check_partial_head(partial_head: bytearray) -> None:
        first_end = partial_head.find(b"\r\n")
        if (first_end < 0 and len(partial_head) > MAX_REQUEST_LINE) or first_end > MAX_REQUEST_LINE:
            raise Refusal(414, "uri_too_long", "Request line is larger than the limit")
        if len(partial_head) > MAX_HEAD_BYTES:
            raise Refusal(431, "header_too_large", "Request headers are larger than the limit")

    def _hand_over(self, state: Reading, body: bytes) -> None:
        """A complete request: to the thread pool; bytes after it wait for the next request.

        gunicorn's parser gets the head only; the body, already whole, reaches the app as the request's
        `wsgi.input` (a HeldBody, see `handle_request`) instead of being parsed out of the parser's buffer again.
        """
        conn = state.conn
        self._leave(state)
        head = state.head or b""
        if state.chunked is not None:
            head += b"\r\nContent-Length: " + str(len(body)).encode()
        if conn.parser is None:
            conn.parser = http.get_parser(self.cfg, conn.sock, conn.client)
        conn.initialized = True
        conn.data_ready = True
        conn.parser.unreader.unread(head + b"\r\n\r\n")
        conn.held_body = body
        conn.leftover = bytes(state.buf)  # a pipelined next request
        self.enqueue_req(conn)

    def handle_request(self, req: Any, conn: TConn) -> Any:
        body = getattr(conn, "held_body", None)
        if body is not None:
            conn.held_body = None
            # The head's Content-Length is the body's length (a chunked body was given one above); the parser
            # discards what the app leaves unread from this object, never from the socket.
            req.body = HeldBody(body)
        return super().handle_request(req, conn)

    def finish_request(self, conn: TConn, fs: Any) -> None:
        leftover = getattr(conn, "leftover", b"")
        conn.leftover = b""
        if not fs.cancelled() and fs.exception() is None and fs.result() is True and self.alive and leftover:
            self._start_reading(conn, leftover)
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
        if state.head is None:
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

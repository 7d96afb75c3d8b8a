"""Request framing by llhttp (the `httptools` binding): where each request of a connection begins and ends.

llhttp, the parser of Node.js, is strict by default: it refuses control characters in header values, a bare LF or
CR where CRLF belongs, obs-fold, a duplicate or malformed Content-Length, Content-Length beside
Transfer-Encoding, a Transfer-Encoding whose last coding is not `chunked`, and malformed chunk sizes, extensions
and trailers. What llhttp accepts and this service still refuses is checked here:

- a request line that is not exactly `method SP target SP HTTP/d.d CRLF` (llhttp also takes empty lines before it
  and runs of spaces; h11 refuses both), and a method outside METHODS (answered 405 or 404 by the worker, as the
  app would);
- an HTTP version other than 1.0 and 1.1 (llhttp reads 0.9 and 2.0 request lines);
- an HTTP/1.1 request without exactly one Host, an HTTP/1.0 request with more than one (RFC 9112 section 3.2);
- any Transfer-Encoding other than a single `chunked`, and any Transfer-Encoding in HTTP/1.0 (RFC 9112 section
  6.1: its framing cannot be trusted);
- an expectation other than 100-continue (417);
- the size bounds: request line, header count and size, chunk lines and trailer section, and the body limit.

After an HTTP/1.0 request, and after a request asking to upgrade the protocol, the connection closes.

A `Framing` lives as long as its connection: bytes after one request stay in llhttp for the next, so pipelined
requests are framed exactly once, by the parser. Complete requests (and, after them, the refusal that ended the
connection's framing) queue in `ready`, in the order they arrived.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

import httptools

# Methods the app may see. Any other token is answered by the worker as the app would (405 with Allow on a path it
# serves, 404 elsewhere), so the exporter's `method` label stays within this closed set.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"})
# gunicorn's own parser limits (limit_request_line, limit_request_field_size, limit_request_fields defaults): the
# loop refuses past them first, so the parser in the thread never meets a head it would refuse for size.
MAX_REQUEST_LINE = 4094
MAX_FIELD_LINE = 8190
MAX_FIELDS = 100
MAX_HEAD_BYTES = 32 * 1024
MAX_TRAILER_BYTES = 8 * 1024
MAX_CHUNK_LINE = 1024
# What a chunked body may hold between two pieces of data: a chunk-size line with its extensions, or the trailer
# section (llhttp keeps neither, but httptools collects each trailer field whole before it is handed over).
MAX_CHUNK_GAP = MAX_CHUNK_LINE + MAX_TRAILER_BYTES

# What the handed-on head carries instead: the body's length, never the client's framing or its expectation.
_FRAMING_FIELDS = frozenset({b"content-length", b"transfer-encoding", b"expect"})
# RFC 9112 section 3: method SP request-target SP HTTP-version CRLF, nothing before it, single spaces.
_REQUEST_LINE = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([\x21-\x7e]+) HTTP/([0-9]\.[0-9])\r\n")


class Refusal(Exception):
    """The request cannot be served: answer `status` with `detail` and close."""

    def __init__(self, status: int, reason: str, detail: str, target: bytes = b"") -> None:
        super().__init__(detail)
        self.status = status
        self.reason = reason
        self.detail = detail
        self.target = target
        self.headers: list[tuple[str, str]] = []


def bad_framing(detail: str) -> Refusal:
    return Refusal(400, "bad_framing", detail)


def _bad_request_line() -> Refusal:
    return Refusal(400, "bad_request", "Invalid request line")


def _request_line_refusal(match: re.Match[bytes] | None) -> Refusal | None:
    """None for a well-formed request line (`_REQUEST_LINE`'s match) of a method the app takes; else why it is
    refused (a method outside METHODS is answered by the worker as the app would: 405 or 404)."""
    if match is None:
        return _bad_request_line()
    if match[1].decode("ascii") not in METHODS:
        return Refusal(501, "method", "Method Not Implemented", target=match[2])
    return None


@dataclass
class Message:
    """A request being read, then a complete one: its head as handed on to gunicorn, its body whole."""

    url: bytearray = field(default_factory=bytearray)
    fields: list[tuple[bytes, bytes]] = field(default_factory=list)
    head_done: bool = False
    content_length: int = 0
    chunked: bool = False
    expect_continue: bool = False
    close: bool = False  # after this request the connection closes (HTTP/1.0, a declined protocol upgrade)
    chunks: list[bytes] = field(default_factory=list)
    body_size: int = 0
    gap: int = 0  # bytes of a chunked body fed since its last data: a chunk line, the trailer section
    head: bytes = b""

    @property
    def body(self) -> bytes:
        return self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)


class _Reader:
    """llhttp's callbacks and what they read. It never holds the parser: a Framing holds both, without a reference
    cycle, so a connection's buffers go with it at once (the workers' garbage collector runs rarely)."""

    def __init__(self, max_body_bytes: int) -> None:
        self.max_body_bytes = max_body_bytes
        self.ready: deque[Message | Refusal] = deque()
        self.message: Message | None = None  # the request being read, from its first byte to its end
        self.method = ""  # of the request being read, from its request line
        self.version = ""

    def on_message_begin(self) -> None:
        self.message = Message()

    def on_url(self, url: bytes) -> None:
        message = self.message
        assert message is not None
        message.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        message = self.message
        assert message is not None
        if message.head_done:  # a trailer field (bounded by MAX_CHUNK_GAP): dropped, the app never sees trailers
            return
        if len(message.fields) >= MAX_FIELDS:
            raise Refusal(431, "header_too_large", "Too many header fields")
        if len(name) + len(value) + 2 > MAX_FIELD_LINE:
            raise Refusal(431, "header_too_large", "A header field is larger than the limit")
        message.fields.append((name, value.rstrip(b" \t")))

    def on_headers_complete(self) -> None:
        message = self.message
        assert message is not None
        version = self.version
        if version not in ("1.1", "1.0"):
            raise Refusal(400, "bad_request", "Unsupported HTTP version")
        hosts = 0
        codings: list[bytes] = []
        upgrade = connection_upgrade = False
        for name, value in message.fields:
            lower = name.lower()
            if lower == b"host":
                hosts += 1
            elif lower == b"content-length":
                message.content_length = int(value)  # llhttp allows digits only, and one Content-Length
            elif lower == b"transfer-encoding":
                codings.append(value.lower())
            elif lower == b"expect":
                # RFC 9110 section 10.1.1: 100-continue is the one expectation there is; an HTTP/1.0 client's is
                # ignored.
                if value.lower() != b"100-continue":
                    raise Refusal(417, "bad_request", "Expectation Failed: only 100-continue is supported")
                message.expect_continue = version == "1.1"
            elif lower == b"upgrade":
                upgrade = True
            elif lower == b"connection":
                connection_upgrade |= b"upgrade" in (token.strip() for token in value.lower().split(b","))
        if hosts > 1 or (hosts == 0 and version == "1.1"):
            raise Refusal(400, "bad_request", "An HTTP/1.1 request needs exactly one Host header")
        if codings and (codings != [b"chunked"] or version != "1.1"):
            raise bad_framing("Only Transfer-Encoding: chunked is supported, in HTTP/1.1")
        if message.content_length > self.max_body_bytes:
            raise Refusal(413, "body_too_large", "Request body is larger than the configured limit")
        message.chunked = bool(codings)
        # After an HTTP/1.0 request the connection closes whatever it asks: its keep-alive is a pre-standard
        # extension that many parsers do not read. After an upgrade request too (llhttp's rule: Upgrade and
        # Connection: upgrade): the request is served, the switch declined.
        message.close = version == "1.0" or (upgrade and connection_upgrade)
        message.head_done = True
        head = [b"%s %s HTTP/%s" % (self.method.encode("ascii"), message.url, version.encode("ascii"))]
        for name, value in message.fields:
            lower = name.lower()
            if lower in _FRAMING_FIELDS or (message.close and lower in (b"connection", b"upgrade")):
                continue
            head.append(name + b": " + value)
        message.head = b"\r\n".join(head)
        message.fields = []
        message.url = bytearray()

    def on_body(self, data: bytes) -> None:
        message = self.message
        assert message is not None
        message.body_size += len(data)
        message.gap = 0
        if message.body_size > self.max_body_bytes:
            raise Refusal(413, "body_too_large", "Request body is larger than the configured limit")
        message.chunks.append(data)

    def on_message_complete(self) -> None:
        message = self.message
        assert message is not None
        length = message.body_size
        message.head += (b"\r\nContent-Length: %d" % length if length else b"") + (
            b"\r\nConnection: close" if message.close else b""
        )
        self.ready.append(message)
        self.message = None


class Framing:
    """One connection's requests, framed by llhttp; see the module docstring."""

    def __init__(self, max_body_bytes: int) -> None:
        self.reader = _Reader(max_body_bytes)
        self.parser = httptools.HttpRequestParser(self.reader)
        self.ready = self.reader.ready  # complete requests, then the refusal that ended the framing, if any
        self.head_bytes = 0  # bytes of the current head fed so far
        self.line = bytearray()  # the current request line, until its end
        self.in_line = False  # the request line has begun and not ended
        self.head_tail = b""  # the last bytes of the head fed so far (its end may straddle two reads)
        self.ended = False  # a refusal or an upgrade ended the framing: nothing more is read

    @property
    def message(self) -> Message | None:
        """The request being read, from its first byte to its end."""
        return self.reader.message

    def feed(self, data: bytes) -> None:
        """Frame `data`; complete requests and a final refusal go to `ready`.

        llhttp is given the bytes in pieces that end where a request may end: the request line, the header section
        (to the empty line, the one end of it llhttp takes), each line of a chunked body, and exactly the rest of a
        body of declared length. So every request starts a piece, and its request line is checked whole before
        llhttp reads its end (llhttp alone would also take empty lines before it and more than one space between
        its parts, which RFC 9112 lets a strict recipient refuse).
        """
        end = len(data)
        pos = 0
        with memoryview(data) as view:
            while pos < end and not self.ended:
                message = self.reader.message
                if message is not None and message.head_done and not message.chunked:
                    stop = min(end, pos + message.content_length - message.body_size)
                elif message is not None and not message.head_done and not self.in_line:
                    stop = self._header_section_end(data, pos)
                else:
                    newline = data.find(b"\n", pos)
                    stop = end if newline < 0 else newline + 1
                self._feed_piece(view[pos:stop])
                pos = stop

    def _header_section_end(self, data: bytes, pos: int) -> int:
        """Where in `data` the header section being read ends (after its CRLF CRLF, which may have begun in what was
        fed before), or the end of `data`."""
        tail = self.head_tail
        found = (tail + data[pos : pos + 3]).find(b"\r\n\r\n")
        if found >= 0:
            return pos + found + 4 - len(tail)
        found = data.find(b"\r\n\r\n", pos)
        return len(data) if found < 0 else found + 4

    def _feed_piece(self, piece: memoryview) -> None:
        reader = self.reader
        message = reader.message
        if message is None or self.in_line:
            if message is None:
                self.line.clear()
                self.head_bytes = 0
                self.head_tail = b""
                self.in_line = True
            self.line += piece
            if len(self.line) > MAX_REQUEST_LINE + 2:  # its CRLF not counted
                self._end(Refusal(414, "uri_too_long", "Request line is larger than the limit"))
                return
            if piece[-1:] == b"\n":
                self.in_line = False
                match = _REQUEST_LINE.fullmatch(self.line)
                refusal = _request_line_refusal(match)
                if refusal is not None:
                    self._end(refusal)
                    return
                assert match is not None
                reader.method, reader.version = match[1].decode("ascii"), match[3].decode("ascii")
        if message is None or not message.head_done:
            self.head_bytes += len(piece)
            self.head_tail = (self.head_tail + piece[-3:].tobytes())[-3:]
        elif message.chunked:
            message.gap += len(piece)
        try:
            self.parser.feed_data(piece)
        except httptools.HttpParserCallbackError as exc:
            context = exc.__context__
            self._end(context if isinstance(context, Refusal) else bad_framing(f"Malformed request: {exc}"))
        except httptools.HttpParserUpgrade:
            # Only a request without a body upgrades (llhttp), and it is complete: it was marked to close the
            # connection after its answer (Message.close), and nothing after it is read.
            self.ended = True
        except httptools.HttpParserInvalidMethodError:
            self._end(_request_line_refusal(_REQUEST_LINE.fullmatch(self.line)) or _bad_request_line())
        except httptools.HttpParserError as exc:
            self._end(bad_framing(f"Malformed request: {exc}"))
        else:
            current = reader.message
            if current is None:
                return
            if not current.head_done and self.head_bytes > MAX_HEAD_BYTES:
                self._end(Refusal(431, "header_too_large", "Request headers are larger than the limit"))
            elif current.gap > MAX_CHUNK_GAP:
                self._end(bad_framing("Malformed chunked body: a chunk line or the trailer section is too large"))

    def truncated(self) -> Message | None:
        """At the end of the stream: the request being read when its head was whole and its body of declared length
        was cut short (the app then answers the truncated body), else None."""
        message = self.reader.message
        if message is None or not message.head_done or message.chunked or not message.content_length:
            return None
        self.reader.message = None
        self.ended = True
        message.head += b"\r\nContent-Length: %d" % message.body_size
        return message

    def _end(self, refusal: Refusal) -> None:
        self.ready.append(refusal)
        self.ended = True
        self.reader.message = None

"""A stub Loki for the benchmarks and tests: `GET /loki/api/v1/query_range` and `/loki/api/v1/query` on 127.0.0.1.

It holds streams (labels and timed lines) and answers the LogQL the open provider sends, evaluated for real: a
stream selector (`=`, `!=`, `=~`, `!~`), line filters (`|=`, `!=`, `|~`, `!~`), and the one metric shape
`sum by (a, b) (count_over_time(<log query> | regexp "..." [Ns]))`; `start`, `end`, `time`, `limit` and
`direction` as Loki reads them. Each answer waits `delay_s` first (a Loki answering in 50 ms). A stream may hold
*runs*: many lines that differ only in their numbers (a rank's training output), kept as a count and a function
that writes line `i`; a filter is evaluated on a run's first line and its answer taken for all of them, so that a
fleet of thousands of nodes with long logs costs little memory. It counts the queries, the bytes of JSON sent and
the most queries held at once. Stdlib only.
"""

from __future__ import annotations

import bisect
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

Labels = tuple[tuple[str, str], ...]


@dataclass
class Run:
    """`count` lines, line i at `first_ns + i * step_ns`, written by `make(i)`."""

    first_ns: int
    step_ns: int
    count: int
    make: Callable[[int], str]

    def index_range(self, start: int, end: int) -> tuple[int, int]:
        """Indices of the lines with start <= ts < end."""
        lo = max(0, -(-(start - self.first_ns) // self.step_ns))
        hi = min(self.count, -(-(end - self.first_ns) // self.step_ns))
        return lo, max(lo, hi)


@dataclass
class Stream:
    labels: dict[str, str]
    lines: list[tuple[int, str]] = field(default_factory=list)  # sorted by time
    runs: list[Run] = field(default_factory=list)


# ---------------------------------------------------------------- a small LogQL reader

_GO_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _string(text: str, i: int) -> tuple[str, int]:
    """The LogQL string literal at text[i] (Go double-quoted or raw), and the index after it."""
    if text[i] == "`":
        end = text.index("`", i + 1)
        return text[i + 1 : end], end + 1
    assert text[i] == '"', text[i:]
    out = []
    i += 1
    while text[i] != '"':
        ch = text[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        kind = text[i + 1]
        if kind in _GO_ESCAPES:
            out.append(_GO_ESCAPES[kind])
            i += 2
        else:
            width = {"x": 2, "u": 4, "U": 8}[kind]
            out.append(chr(int(text[i + 2 : i + 2 + width], 16)))
            i += 2 + width
    return "".join(out), i + 1


def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)  # the RE2 the provider writes is also Python's syntax


@dataclass
class LogQuery:
    matchers: list[tuple[str, str, str]]  # (label, op, value)
    stages: list[tuple[str, str]]  # (op, value): |= != |~ !~ and "regexp"

    def selects(self, labels: Mapping[str, str]) -> bool:
        for label, op, value in self.matchers:
            have = labels.get(label, "")
            if op == "=" and have != value or op == "!=" and have == value:
                return False
            if op == "=~" and _cached(value) and value in _HEADS:
                if have.lower().partition(".")[0] not in _HEADS[value]:
                    return False
            elif op in ("=~", "!~") and (_cached(value).fullmatch(have) is not None) != (op == "=~"):
                return False
        return True

    def keeps(self, line: str) -> bool:
        for op, value in self.stages:
            if op == "|=" and value not in line or op == "!=" and value in line:
                return False
            if op in ("|~", "!~") and (_cached(value).search(line) is not None) != (op == "|~"):
                return False
        return True

    def extracted(self, line: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for op, value in self.stages:
            if op == "regexp":
                m = _cached(value).search(line)
                if m:
                    out.update({k: v for k, v in m.groupdict().items() if v is not None})
        return out


_PATTERNS: dict[str, re.Pattern[str]] = {}


def _cached(pattern: str) -> re.Pattern[str]:
    found = _PATTERNS.get(pattern)
    if found is None:
        found = _PATTERNS[pattern] = _regex(pattern)
        m = _HOST_ALTERNATION.fullmatch(pattern)
        if m and "(" not in m.group(1):
            # the job-log source's host matcher, `(?i)(?:a|b)(?:\..*)?`: looked up by short name instead of run on
            # every stream (what it selects is the same; thousands of streams would make the stub slower than Loki)
            _HEADS[pattern] = frozenset(re.sub(r"\\(.)", r"\1", h).lower() for h in m.group(1).split("|"))
    return found


_HOST_ALTERNATION = re.compile(r"\(\?i\)\(\?:(.*)\)\(\?:\\\.\.\*\)\?")
_HEADS: dict[str, frozenset[str]] = {}


def parse_log_query(text: str) -> tuple[LogQuery, int]:
    i = text.index("{") + 1
    matchers = []
    while True:
        while text[i] in " ,":
            i += 1
        if text[i] == "}":
            i += 1
            break
        m = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*").match(text, i)
        assert m, text[i:]
        value, i = _string(text, m.end())
        matchers.append((m.group(1), m.group(2), value))
    stages = []
    while True:
        while i < len(text) and text[i] == " ":
            i += 1
        head = text[i : i + 2]
        if head in ("|=", "!=", "|~", "!~"):
            j = i + 2
            while text[j] == " ":
                j += 1
            value, i = _string(text, j)
            stages.append((head, value))
        elif text.startswith("| regexp", i):
            j = i + len("| regexp")
            while text[j] == " ":
                j += 1
            value, i = _string(text, j)
            stages.append(("regexp", value))
        else:
            break
    return LogQuery(matchers, stages), i


_METRIC = re.compile(r"sum by \((?P<by>[^)]*)\) \(count_over_time\((?P<inner>.*) \[(?P<secs>\d+)s\]\)\)$", re.S)


class LogStore:
    """Streams, and the answer to a query against them as Loki would give it (status, JSON body)."""

    def __init__(self, streams: Iterable[Stream]) -> None:
        self.streams = list(streams)
        for s in self.streams:
            s.lines.sort(key=lambda e: e[0])
        self._keep_cache: dict[tuple[int, str], tuple[list[tuple[int, str]], list[Run]]] = {}
        self._select_cache: dict[str, list[int]] = {}
        self._lock = threading.Lock()

    def answer(self, path: str, params: Mapping[str, str]) -> tuple[int, bytes]:
        try:
            if path == "/loki/api/v1/query_range":
                return 200, self._range(params)
            if path == "/loki/api/v1/query":
                return 200, self._instant(params)
        except (AssertionError, KeyError, ValueError, IndexError, re.error) as exc:
            return 400, json.dumps({"error": f"parse error: {exc}"}).encode()
        return 404, b"{}"

    def _kept(self, index: int, stream: Stream, query: LogQuery, key: str) -> tuple[list[tuple[int, str]], list[Run]]:
        """The stream's lines and runs the query's stages keep (kept for the next query with the same stages)."""
        cache_key = (index, key)
        with self._lock:
            found = self._keep_cache.get(cache_key)
        if found is None:
            found = (
                [(ts, line) for ts, line in stream.lines if query.keeps(line)],
                [run for run in stream.runs if query.keeps(run.make(0))],
            )
            with self._lock:
                self._keep_cache[cache_key] = found
        return found

    def _selected(self, query: LogQuery) -> list[int]:
        key = repr(query.matchers)
        with self._lock:
            found = self._select_cache.get(key)
        if found is None:
            found = [i for i, stream in enumerate(self.streams) if query.selects(stream.labels)]
            with self._lock:
                self._select_cache[key] = found
        return found

    def _range(self, params: Mapping[str, str]) -> bytes:
        text = params["query"]
        query, _ = parse_log_query(text)
        key = repr(query.stages)  # the selector only picks streams; what a stream keeps depends on the stages
        start, end = int(params["start"]), int(params["end"])
        limit = int(params.get("limit", "100"))
        backward = params.get("direction", "backward") == "backward"
        sources = []
        for index in self._selected(query):
            lines, runs = self._kept(index, self.streams[index], query, key)
            sources.append((index, lines, runs))
        # The page holds the `limit` entries nearest the end it starts from: find the time that bounds them by
        # counting (runs are counted, not written), then write only the entries on the near side of it.
        start, end = self._bounds(sources, start, end, limit, backward)
        picked: list[tuple[int, int, str]] = []  # (ts, stream index, line)
        for index, lines, runs in sources:
            lo = bisect.bisect_left(lines, (start, ""))
            hi = bisect.bisect_left(lines, (end, ""))
            chosen = lines[max(lo, hi - limit) : hi] if backward else lines[lo : min(hi, lo + limit)]
            picked.extend((ts, index, line) for ts, line in chosen)
            for run in runs:
                a, b = run.index_range(start, end)
                idx = range(max(a, b - limit), b) if backward else range(a, min(b, a + limit))
                picked.extend((run.first_ns + i * run.step_ns, index, run.make(i)) for i in idx)
        picked.sort(key=lambda e: e[0], reverse=backward)
        picked = picked[:limit]
        by_stream: dict[int, list[list[str]]] = {}
        for ts, index, line in sorted(picked, key=lambda e: e[0], reverse=backward):
            by_stream.setdefault(index, []).append([str(ts), line])
        result = [{"stream": self.streams[i].labels, "values": v} for i, v in by_stream.items()]
        return json.dumps({"status": "success", "data": {"resultType": "streams", "result": result}}).encode()

    @staticmethod
    def _bounds(sources: list, start: int, end: int, limit: int, backward: bool) -> tuple[int, int]:
        """[start, end) narrowed, from the far side, to a span that still holds at least `limit` entries."""

        def count(lo: int, hi: int) -> int:
            n = 0
            for _, lines, runs in sources:
                n += bisect.bisect_left(lines, (hi, "")) - bisect.bisect_left(lines, (lo, ""))
                for run in runs:
                    a, b = run.index_range(lo, hi)
                    n += b - a
                if n >= limit:
                    break
            return n

        if count(start, end) <= limit:
            return start, end
        lo, hi = start, end  # backward: the largest cut with count(cut, end) >= limit; forward: the smallest
        while hi - lo > 1:
            mid = (lo + hi) // 2
            enough = count(mid, end) >= limit if backward else count(start, mid) >= limit
            if backward == enough:
                lo = mid
            else:
                hi = mid
        return (lo, end) if backward else (start, hi)

    def _instant(self, params: Mapping[str, str]) -> bytes:
        m = _METRIC.match(params["query"])
        assert m, params["query"]
        by = [b.strip() for b in m.group("by").split(",")]
        query, _ = parse_log_query(m.group("inner"))
        at = params["time"]
        seconds, _, frac = at.partition(".")
        end = int(seconds) * 1_000_000_000 + int((frac + "000000000")[:9]) + 1  # (time - range, time]
        start = end - int(m.group("secs")) * 1_000_000_000
        counts: dict[tuple[str, ...], int] = {}
        stages = repr(query.stages)
        for index in self._selected(query):
            stream = self.streams[index]
            lines, runs = self._kept(index, stream, query, stages)
            items: list[tuple[str, int]] = [(line, 1) for ts, line in lines if start <= ts < end]
            for run in runs:
                a, b = run.index_range(start, end)
                if b > a:
                    items.append((run.make(0), b - a))
            for line, n in items:
                labels = {**stream.labels, **query.extracted(line)}
                key = tuple(labels.get(name, "") for name in by)
                counts[key] = counts.get(key, 0) + n
        result = [
            {"metric": {name: value for name, value in zip(by, key, strict=True) if value}, "value": [at, str(n)]}
            for key, n in counts.items()
        ]
        return json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()


class StubLoki:
    """`with StubLoki(delay_s=0.05, store=...) as loki:` serves on `loki.url` until the block ends.

    Without a store it holds one Xid 79 line at `at_ns` on each host of `xid_hosts` (the kernel scope benchmark).
    """

    def __init__(
        self, delay_s: float = 0.05, xid_hosts: tuple[str, ...] = (), at_ns: int = 0, store: LogStore | None = None,
        max_entries: int | None = None,
    ) -> None:
        self.delay_s = delay_s
        #: the tenant's `max_entries_limit_per_query`: a query asking more is refused as Loki refuses it
        self.max_entries = max_entries
        self.refused = 0
        line = "NVRM: Xid (PCI:0000:91:00): 79, pid=1, GPU has fallen off the bus."
        self.store = store or LogStore(Stream({"host": h}, [(at_ns, line)]) for h in xid_hosts)
        self.url_lengths: list[int] = []
        self.bytes_sent = 0
        self.in_flight = 0
        self.most_in_flight = 0
        #: answers whose own work took longer than `delay_s` (the stub's caches filling on a query's first sight):
        #: those came later than the delay a benchmark promises, by `late_s` in all
        self.late = 0
        self.late_s = 0.0
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                # headers and body go out in two writes: without this a kept-alive connection waits for the
                # client's delayed ACK (about 40 ms) before the body, which no real Loki does
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                url = urlparse(self.path)
                if url.path in ("/stats", "/reset"):  # the benchmark's own requests, not counted
                    if url.path == "/reset":
                        stub.reset()
                    body = json.dumps(stub.stats()).encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                with stub.lock:
                    stub.in_flight += 1
                    stub.most_in_flight = max(stub.most_in_flight, stub.in_flight)
                    stub.url_lengths.append(len(self.path) + len(stub.url))
                answered = False
                try:
                    started = time.monotonic()
                    params = {k: v[0] for k, v in parse_qs(url.query).items()}
                    limit = int(params.get("limit", "0") or "0")
                    if stub.max_entries is not None and limit > stub.max_entries:
                        with stub.lock:
                            stub.refused += 1
                        status, body = 400, (  # Loki's own message, as text
                            "max entries limit per query exceeded, limit > max_entries_limit_per_query "
                            f"({limit} > {stub.max_entries})"
                        ).encode()
                    else:
                        status, body = stub.store.answer(url.path, params)
                    left = stub.delay_s - (time.monotonic() - started)
                    if left > 0:
                        time.sleep(left)
                    with stub.lock:  # held until answered: counted out before the client can send its next query
                        stub.in_flight -= 1
                        stub.bytes_sent += len(body)
                        if left < 0:
                            stub.late += 1
                            stub.late_s -= left
                    answered = True
                    try:
                        self.send_response(status)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(body)))
                        self.end_headers()
                        self.wfile.write(body)
                    except (BrokenPipeError, ConnectionResetError):
                        # the client left before its answer (a provider gives a query up at its deadline): as a
                        # real Loki, nothing to report
                        self.close_connection = True
                finally:
                    if not answered:
                        with stub.lock:
                            stub.in_flight -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> StubLoki:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)

    def reset(self) -> None:
        with self.lock:
            self.url_lengths.clear()
            self.most_in_flight = 0
            self.bytes_sent = 0
            self.late = 0
            self.late_s = 0.0
            self.refused = 0

    def stats(self) -> dict[str, float]:
        with self.lock:
            return {
                "queries": len(self.url_lengths),
                "bytes": self.bytes_sent,
                "most_in_flight": self.most_in_flight,
                "longest_url": max(self.url_lengths, default=0),
                "late": self.late,
                "late_s": round(self.late_s, 3),
                "refused": self.refused,
            }

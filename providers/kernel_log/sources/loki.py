"""The `loki` source: Grafana Loki's `GET /loki/api/v1/query_range`, paged forward in time."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import requests
import urllib3.exceptions

from providers.base import Deadline, ProviderProcessingError, ProviderTimeoutError, SourceFailure, TraceContext
from providers.kernel_log.collect import Collector
from providers.kernel_log.parse import parse_line

DEFAULT_SELECTOR = '{host=~"{hosts}"}'
PLACEHOLDER = "{hosts}"
#: the longest host alternation put into one query; a larger scope is split into several queries
MAX_ALTERNATION = 8000
#: the largest answer body read for one page; a Loki that sends more is answering something else
MAX_PAGE_BYTES = 32 * 1024 * 1024
READ_CHUNK = 64 * 1024
MSG_TIMEOUT = "the Loki log source did not answer in time"
MSG_UNREADABLE = "the Loki log source answered with an unreadable body"
_RE2_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$])")


def host_alternation(hosts: Sequence[str], raw_string: bool) -> str:
    """An anchored-by-Loki regex alternation of `hosts`, escaped for RE2 and, unless raw, for a "..." string."""
    pattern = "|".join(_RE2_SPECIAL.sub(r"\\\1", h) for h in hosts)
    if raw_string:
        return pattern
    # Inside a LogQL double-quoted string a backslash and a quote need escaping themselves.
    return pattern.replace("\\", "\\\\").replace('"', '\\"')


def build_query(template: str, hosts: Sequence[str]) -> str:
    """Fill the selector template's `{hosts}` placeholder (no str.format: LogQL selectors are full of braces)."""
    at = template.index(PLACEHOLDER)
    raw_string = at > 0 and template[at - 1] == "`"
    return template.replace(PLACEHOLDER, host_alternation(hosts, raw_string))


def _batches(hosts: Sequence[str]) -> list[list[str]]:
    batches: list[list[str]] = [[]]
    size = 0
    for host in hosts:
        if batches[-1] and size + len(host) + 1 > MAX_ALTERNATION:
            batches.append([])
            size = 0
        batches[-1].append(host)
        size += len(host) + 1
    return [b for b in batches if b]


MAX_NS = 2**63 - 1


def _ns(value: datetime) -> int:
    delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def _from_ns(value: int) -> datetime:
    return datetime.fromtimestamp(value // 1000 / 1_000_000, tz=timezone.utc)


class LokiSource:
    """Queries Loki for the scope's hosts over the window, at most `max_pages` pages per query."""

    evidence_source = "loki"

    def __init__(
        self,
        url: str,
        selector: str = DEFAULT_SELECTOR,
        limit: int = 1000,
        max_pages: int = 10,
        tenant: str | None = None,
        host_label: str = "host",
    ) -> None:
        self.endpoint = url.rstrip("/") + "/loki/api/v1/query_range"
        self.selector = selector
        self.limit = limit
        self.max_pages = max_pages
        self.tenant = tenant
        self.host_label = host_label

    def scan(self, collector: Collector, deadline: Deadline, trace: TraceContext | None) -> None:
        """Query every batch of hosts and feed the lines into the collector."""
        headers: dict[str, str] = {"Accept": "application/json"}
        if trace is not None:
            headers.update(trace.headers())
        if self.tenant:
            headers["X-Scope-OrgID"] = self.tenant
        nodes = sorted(set(collector.nodes))
        with requests.Session() as session:
            for batch in _batches(nodes):
                self._query(session, headers, build_query(self.selector, batch), collector, deadline)

    def _query(
        self,
        session: requests.Session,
        headers: dict[str, str],
        query: str,
        collector: Collector,
        deadline: Deadline,
    ) -> None:
        # Loki's times are 64-bit nanoseconds since 1970: a window reaching toward year 1 or 9999 is clipped to
        # them, and one wholly outside them holds no line.
        start = max(0, _ns(collector.window.start))
        end = min(_ns(collector.window.end) + 1, MAX_NS)  # Loki's end is exclusive; the window's end is inclusive
        if end <= start:
            return
        seen_at_start: set[tuple[str, int, str]] = set()
        for _ in range(self.max_pages):
            params: dict[str, str | int] = {
                "query": query,
                "start": start,
                "end": end,
                "limit": self.limit,
                "direction": "forward",
            }
            body = self._get(session, headers, params, deadline)
            entries, total = _entries(body, self.host_label)
            if total > self.limit:
                raise ProviderProcessingError(
                    "the Loki log source answered with more entries than the limit asked for",
                    kind=SourceFailure.MALFORMED,
                )
            fresh = 0
            last = start
            page_keys: set[tuple[str, int, str]] = set()
            for host, ts, line in entries:
                key = (host, ts, line)
                last = max(last, ts)
                if ts == start and key in seen_at_start:
                    continue  # already taken on the previous page: paging restarts at its last timestamp
                fresh += 1
                page_keys.add(key)
                node = collector.node_for(host)
                if node is None:
                    continue
                parsed = parse_line(line)
                if parsed is not None and parsed.tag is not None:
                    message, tag = parsed.message, parsed.tag
                else:
                    message, tag = line, None
                collector.add(node, _from_ns(ts), message, line, tag)
            if total < self.limit:
                return
            if fresh == 0:
                break  # a whole page at one timestamp: no way forward
            # Page forward from the last timestamp received, inclusive, so entries sharing it are not lost;
            # the ones already taken at that instant are recognised and skipped.
            seen_at_start = {k for k in page_keys if k[1] == last} | (seen_at_start if last == start else set())
            start = last
        collector.truncated = True

    def _get(
        self, session: requests.Session, headers: dict[str, str], params: dict[str, str | int], deadline: Deadline
    ) -> Any:
        remaining = deadline.remaining()
        if remaining <= 0:
            raise ProviderTimeoutError(MSG_TIMEOUT)
        try:
            with session.get(self.endpoint, params=params, headers=headers, timeout=remaining, stream=True) as response:
                if response.status_code != 200:
                    raise ProviderProcessingError(
                        f"the Loki log source answered HTTP {response.status_code}", kind=SourceFailure.UNREADABLE
                    )
                raw = _read_body(response, deadline)
        except requests.Timeout as exc:
            raise ProviderTimeoutError(MSG_TIMEOUT) from exc
        except requests.RequestException as exc:
            raise ProviderProcessingError(
                "the Loki log source could not be reached", kind=SourceFailure.UNREACHABLE
            ) from exc
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise ProviderProcessingError(MSG_UNREADABLE, kind=SourceFailure.MALFORMED) from exc


def _read_body(response: requests.Response, deadline: Deadline) -> bytes:
    """The whole body, read piece by piece so neither the deadline nor MAX_PAGE_BYTES can be outrun.

    A timeout given to requests bounds each socket read, not the answer: a backend that trickles bytes would
    otherwise hold this call, its connection and a provider thread long after the caller got its `timeout`.
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        if deadline.expired:
            raise ProviderTimeoutError(MSG_TIMEOUT)
        try:
            chunk = response.raw.read1(READ_CHUNK, decode_content=True)
        except urllib3.exceptions.ReadTimeoutError as exc:
            raise ProviderTimeoutError(MSG_TIMEOUT) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ProviderProcessingError(MSG_UNREADABLE, kind=SourceFailure.UNREACHABLE) from exc
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_PAGE_BYTES:
            raise ProviderProcessingError(
                "the Loki log source answered with a page larger than 32 MiB", kind=SourceFailure.MALFORMED
            )
        chunks.append(chunk)


def _entries(body: Any, host_label: str) -> tuple[list[tuple[str, int, str]], int]:
    """(host, ns timestamp, line) of every entry with a host label, in time order, and the count of all entries."""
    unreadable = ProviderProcessingError(MSG_UNREADABLE, kind=SourceFailure.MALFORMED)
    if not isinstance(body, dict) or body.get("status") != "success":
        raise unreadable
    data = body.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "streams" or not isinstance(data.get("result"), list):
        raise unreadable
    out: list[tuple[str, int, str]] = []
    total = 0
    for stream in data["result"]:
        if not isinstance(stream, dict):
            raise unreadable
        labels = stream.get("stream")
        values = stream.get("values")
        if not isinstance(labels, dict) or not isinstance(values, list):
            raise unreadable
        host = labels.get(host_label)
        for value in values:
            # Loki 3 may add a third element (structured metadata); the first two are what counts.
            if not isinstance(value, list) or len(value) < 2:
                raise unreadable
            ts_text, line = value[0], value[1]
            if not isinstance(ts_text, str) or not isinstance(line, str) or not ts_text.isdigit():
                raise unreadable
            total += 1
            if isinstance(host, str):
                out.append((host, int(ts_text), line))
    out.sort(key=lambda e: e[1])
    return out, total

"""Job logs from Grafana Loki: the tail of one workload attempt's streams, one host label per node.

`ATTRIBUTION_LOKI_JOB_SELECTOR` is a LogQL stream selector template such as `{job="{workload_id}"}`; the
placeholders `{workload_id}` and `{attempt_index}` must each stand as a whole quoted label value, and are filled
with the request's values escaped for that string. The streams' `ATTRIBUTION_LOKI_HOST_LABEL` says which node a
line belongs to. The window is read backward from its end (a failed attempt's evidence is at its end) in pages,
bounded in bytes per node and per request; each node's lines are then parsed oldest first, each with Loki's
timestamp in front of it (a collector time the job-log parser reads).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import requests
import urllib3.exceptions

from providers.base import AttributionRequest, Deadline, ProviderProcessingError, ProviderTimeoutError, TraceContext
from providers.kernel_log.collect import Window
from providers.kernel_log.joblog import MAX_LINE_CHARS, NodeLog, ReadLimits
from providers.kernel_log.joblog.lines import NodeParser
from providers.kernel_log.joblogs import JobLogs, resolver

WORKLOAD = "{workload_id}"
ATTEMPT = "{attempt_index}"
#: the largest answer body read for one page
MAX_PAGE_BYTES = 32 * 1024 * 1024
READ_CHUNK = 64 * 1024
MSG_TIMEOUT = "the Loki job-log source did not answer in time"
MSG_UNREADABLE = "the Loki job-log source answered with an unreadable body"


def template_problem(template: str) -> str | None:
    """Why `template` cannot be a job selector template, or None."""
    if WORKLOAD not in template:
        return f"must contain the {WORKLOAD} placeholder"
    for placeholder in (WORKLOAD, ATTEMPT):
        at = template.find(placeholder)
        while at >= 0:
            before = template[at - 1] if at > 0 else ""
            after = template[at + len(placeholder) : at + len(placeholder) + 1]
            if before not in ('"', "`") or after != before:
                return f"must hold {placeholder} as a whole quoted label value, e.g. {{job=\"{WORKLOAD}\"}}"
            at = template.find(placeholder, at + 1)
    return None


def quote_value(value: str, quote: str) -> str | None:
    """`value` escaped for a LogQL string between `quote`s; None when a raw (backtick) string cannot hold it."""
    if quote == "`":
        return None if "`" in value else value
    out = []
    for ch in value:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def build_job_query(template: str, workload_id: str, attempt_index: int) -> str | None:
    """The template with its placeholders filled (no str.format: selectors are full of braces); None if impossible."""
    out = template
    for placeholder, value in ((WORKLOAD, workload_id), (ATTEMPT, str(attempt_index))):
        at = out.find(placeholder)
        while at >= 0:
            quoted = quote_value(value, out[at - 1])
            if quoted is None:
                return None
            out = out[:at] + quoted + out[at + len(placeholder) :]
            at = out.find(placeholder, at + len(quoted))
    return out


def _ns(value: datetime) -> int:
    delta = value - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def _stamp(ns: int) -> str:
    return datetime.fromtimestamp(ns // 1000 / 1_000_000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LokiJobLogSource:
    """Reads job-log streams from Loki's `query_range`, backward from the window's end, bounded in bytes."""

    url: str
    template: str
    host_label: str = "host"
    limit: int = 1000
    max_pages: int = 10
    tenant: str | None = None
    limits: ReadLimits = ReadLimits()

    @property
    def endpoint(self) -> str:
        return self.url.rstrip("/") + "/loki/api/v1/query_range"

    def read(
        self, request: AttributionRequest, nodes: Sequence[str], window: Window, deadline: Deadline,
        trace: TraceContext | None,
    ) -> JobLogs:
        query = build_job_query(self.template, request.workload_id, request.workload_context.attempt_index)
        if query is None:
            return JobLogs({}, ("the workload id cannot be put into the Loki job-log selector: no job logs were read",))
        headers = {"Accept": "application/json"}
        if trace is not None:
            headers.update(trace.headers())
        if self.tenant:
            headers["X-Scope-OrgID"] = self.tenant
        resolve = resolver(nodes)
        share = min(self.limits.node_bytes, max(1, self.limits.request_bytes // max(1, len(nodes))))
        newest_first: dict[str, list[tuple[int, str]]] = {}
        used: dict[str, int] = {}
        total = 0
        start, end = _ns(window.start), _ns(window.end) + 1  # Loki's end is exclusive
        seen_at_end: set[tuple[str, int, str]] = set()
        cut = False
        with requests.Session() as session:
            for page in range(self.max_pages + 1):
                if page == self.max_pages:
                    cut = True
                    break
                params: dict[str, str | int] = {
                    "query": query, "start": start, "end": end, "limit": self.limit, "direction": "backward",
                }
                entries, count = _entries(self._get(session, headers, params, deadline), self.host_label)
                fresh = 0
                for host, ts, line in entries:
                    if (host, ts, line) in seen_at_end:
                        continue
                    fresh += 1
                    node = resolve(host)
                    if node is None or used.get(node, 0) >= share:
                        continue
                    line = line[:MAX_LINE_CHARS]
                    size = len(line.encode("utf-8", "replace")) + 1
                    used[node] = used.get(node, 0) + size
                    total += size
                    newest_first.setdefault(node, []).append((ts, line))
                if count < self.limit or total >= self.limits.request_bytes:
                    cut = count >= self.limit
                    break
                if fresh == 0 or not entries:
                    break  # a whole page at one instant: no way further back
                oldest = entries[-1][1]
                seen_at_end = {e for e in entries if e[1] == oldest} | (seen_at_end if oldest + 1 == end else set())
                end = oldest + 1
                if len(used) == len(nodes) and all(v >= share for v in used.values()):
                    cut = True
                    break
        logs: dict[str, NodeLog] = {}
        for node in nodes:
            lines = newest_first.get(node)
            if not lines:
                continue
            parser = NodeParser(node, resolve)
            for ts, line in reversed(lines):
                parser.feed(f"{_stamp(ts)} {line}")
            logs[node] = parser.result()
        notes = []
        if cut:
            notes.append("older job-log lines in Loki lie beyond the read bound and were not read")
        return JobLogs(logs, tuple(notes))

    def _get(
        self, session: requests.Session, headers: dict[str, str], params: dict[str, str | int], deadline: Deadline
    ) -> Any:
        remaining = deadline.remaining()
        if remaining <= 0:
            raise ProviderTimeoutError(MSG_TIMEOUT)
        try:
            with session.get(self.endpoint, params=params, headers=headers, timeout=remaining, stream=True) as response:
                if response.status_code != 200:
                    raise ProviderProcessingError(f"the Loki job-log source answered HTTP {response.status_code}")
                raw = _body(response, deadline)
        except requests.Timeout as exc:
            raise ProviderTimeoutError(MSG_TIMEOUT) from exc
        except requests.RequestException as exc:
            raise ProviderProcessingError("the Loki job-log source could not be reached") from exc
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise ProviderProcessingError(MSG_UNREADABLE) from exc


def _body(response: requests.Response, deadline: Deadline) -> bytes:
    """The body, read in pieces so that neither the deadline nor MAX_PAGE_BYTES can be outrun."""
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
            raise ProviderProcessingError(MSG_UNREADABLE) from exc
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_PAGE_BYTES:
            raise ProviderProcessingError("the Loki job-log source answered with a page larger than 32 MiB")
        chunks.append(chunk)


def _entries(body: Any, host_label: str) -> tuple[list[tuple[str, int, str]], int]:
    """(host, ns timestamp, line) of the entries with a host label, newest first, and the count of all entries."""
    bad = ProviderProcessingError(MSG_UNREADABLE)
    if not isinstance(body, dict) or body.get("status") != "success":
        raise bad
    data = body.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "streams" or not isinstance(data.get("result"), list):
        raise bad
    out: list[tuple[str, int, str]] = []
    count = 0
    for stream in data["result"]:
        if not isinstance(stream, dict) or not isinstance(stream.get("stream"), dict):
            raise bad
        values = stream.get("values")
        if not isinstance(values, list):
            raise bad
        host = stream["stream"].get(host_label)
        for value in values:
            if not isinstance(value, list) or len(value) < 2:
                raise bad
            ts, line = value[0], value[1]
            if not isinstance(ts, str) or not ts.isdigit() or not isinstance(line, str):
                raise bad
            count += 1
            if isinstance(host, str):
                out.append((host, int(ts), line))
    out.sort(key=lambda e: e[1], reverse=True)
    return out, count

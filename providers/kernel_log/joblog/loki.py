"""Job logs from Grafana Loki: the tail of one workload attempt's streams, one host label per node.

`ATTRIBUTION_LOKI_JOB_SELECTOR` is a LogQL stream selector template such as `{job="{workload_id}"}`; the
placeholders `{workload_id}` and `{attempt_index}` must each stand as a whole quoted label value, and are filled
with the request's values escaped for that string. The streams' `ATTRIBUTION_LOKI_HOST_LABEL` says which node a
line belongs to. The window is read backward from its end (a failed attempt's evidence is at its end) in pages,
bounded in bytes per node and per request; each node's lines are then parsed oldest first, each with Loki's
timestamp in front of it (a collector time the job-log parser reads).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import requests

from providers.base import AttributionRequest, Deadline, TraceContext
from providers.kernel_log.joblog import MAX_LINE_CHARS, NodeLog, ReadLimits
from providers.kernel_log.joblog.lines import NodeParser
from providers.kernel_log.joblog.source import JobLogs, resolver
from providers.kernel_log.loki.client import get_json, ns_span, read_entries
from providers.kernel_log.loki.logql import SelectorTemplate, TemplateError, representable
from providers.kernel_log.window import Window

WORKLOAD = "{workload_id}"
ATTEMPT = "{attempt_index}"
SOURCE = "the Loki job-log source"


def _templates(template: str) -> list[SelectorTemplate]:
    """The template parsed once per placeholder it holds, attempt first; TemplateError says why it cannot be used."""
    if WORKLOAD not in template:
        raise TemplateError(f'must contain the {WORKLOAD} placeholder, e.g. {{job="{WORKLOAD}"}}')
    return [SelectorTemplate(template, p) for p in (ATTEMPT, WORKLOAD) if p in template]


def template_problem(template: str) -> str | None:
    """Why `template` cannot be a job selector template, or None."""
    try:
        _templates(template)
    except TemplateError as exc:
        return str(exc)
    return None


def build_job_query(template: str, workload_id: str, attempt_index: int) -> str | None:
    """The template with its placeholders filled and escaped for where each sits (logql.SelectorTemplate): the
    attempt first (digits only, so the template's shape stays), then the workload id; None when no LogQL string
    can carry the workload id."""
    query = template
    if ATTEMPT in template:
        query = SelectorTemplate(query, ATTEMPT).render(str(attempt_index))
    if not representable(workload_id):
        return None
    return SelectorTemplate(query, WORKLOAD).render(workload_id)


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
        self,
        request: AttributionRequest,
        nodes: Sequence[str],
        window: Window,
        deadline: Deadline,
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
        span = ns_span(window.start, window.end)
        if span is None:
            return JobLogs({}, ())
        start, end = span
        seen_at_end: set[tuple[str, int, str]] = set()
        cut = False
        with requests.Session() as session:
            for page in range(self.max_pages + 1):
                if page == self.max_pages:
                    cut = True
                    break
                params: dict[str, str | int] = {
                    "query": query,
                    "start": start,
                    "end": end,
                    "limit": self.limit,
                    "direction": "backward",
                }
                body = get_json(session, self.endpoint, headers, deadline, params, SOURCE)
                entries, count = read_entries(body, self.host_label, SOURCE)
                entries.reverse()  # newest first
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

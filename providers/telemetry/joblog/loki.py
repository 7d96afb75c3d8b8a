"""Job logs from Grafana Loki: the lines of one workload attempt's streams that the job-log parser can use.

`ATTRIBUTION_LOKI_JOB_SELECTOR` is a LogQL stream selector template such as `{job="{workload_id}"}`; the
placeholders `{workload_id}` and `{attempt_index}` must each stand as a whole quoted label value, and are filled
with the request's values escaped for that string. The streams' `ATTRIBUTION_LOKI_HOST_LABEL` says which node a
line belongs to.

Most lines of a training log give the parser nothing but a count, so Loki is asked for the others only. The scope's
nodes are split into batches (a host matcher added to the selector: each node's short name, any domain after it,
case ignored; each query URL within 8 KiB, at most `MAX_BATCH_NODES` nodes, fewer in a scope too small to keep
`ATTRIBUTION_LOKI_CONCURRENCY` queries busy otherwise); for each batch, side by side within
`ATTRIBUTION_LOKI_CONCURRENCY` queries at once and the deadline:

- the signal lines: `|~` with the literal markers of `markers.py`, read backward from the window's end in pages of
  `ATTRIBUTION_LOKI_LIMIT`, until each node of the batch has its share of the job-log byte bound or the pages
  (`ATTRIBUTION_LOKI_MAX_PAGES`) end;
- the entry headers of torchelastic's failure summary (`[0]:`, a line that holds no literal marker): `|~` with one
  anchored pattern, one page.

Once every line query is answered, where the ranks of `scope.ranks` that no line read places (a rank that fell
silent) wrote: a metric query, `sum by (host, rank) (count_over_time(... | regexp ...))`, naming each (node, rank)
pair with `[rankN]:` lines in the window whatever their number. It names those ranks (`|~ "\\\\[rank(?:a|b)\\\\]:"`,
at most `MAX_PLACEMENT_RANKS` a query, over the job's streams), or, when that would take more queries, every rank
(`|= "[rank"`) over the batches' nodes, at most `MAX_PLACEMENT_NODES` a query. Each rank it places then gets its
newest line read (`|= "[rankN]:"`, one line, backward), at most `MAX_LAST_LINES` of them a request: the rules place a
rank by its lines and show its last one, and look for silent ranks only among those the request names. A rank whose
own lines were read on one node is not looked for on the others.

Each node's lines are then parsed oldest first, each with Loki's timestamp in front of it (a collector time the
job-log parser reads).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Any
from urllib.parse import quote, urlencode

import requests

from providers.base import (
    AttributionRequest,
    Deadline,
    ProviderProcessingError,
    ProviderTimeoutError,
    SourceFailure,
    TraceContext,
)
from providers.telemetry.compiled import compiled
from providers.telemetry.digits import number
from providers.telemetry.joblog import MAX_LINE_CHARS, NodeLog, ReadLimits
from providers.telemetry.joblog.lines import NodeParser
from providers.telemetry.joblog.markers import markers
from providers.telemetry.joblog.nodes import NodeResolver
from providers.telemetry.joblog.prefilter import feed_tail
from providers.telemetry.joblog.source import JobLogs, resolver
from providers.telemetry.loki.client import (
    EntryLimit,
    encoded_length,
    get_json,
    ns_span,
    read_entries,
    results,
    session,
)
from providers.telemetry.loki.fanout import NotFinished, Pool, Slots, until_for
from providers.telemetry.loki.logql import (
    SelectorTemplate,
    TemplateError,
    go_escape,
    literal_alternation,
    regex_escape,
    representable,
    string,
    with_matcher,
)
from providers.telemetry.window import Window

WORKLOAD = "{workload_id}"
ATTEMPT = "{attempt_index}"
SOURCE = "the Loki job-log source"
#: the longest query URL sent (the request-line buffer of the proxies Loki usually sits behind is 8 KiB)
MAX_URL_BYTES = 8 * 1024
#: nodes of one batch at most (fewer batches: fewer queries; smaller ones: shorter chains of pages, and the parser,
#: which takes a batch once its last page is in, starts sooner; at 4,096 nodes bench/loki_fleet.py sends 214 queries
#: with 64 a batch against 198 with 256)
MAX_BATCH_NODES = 64
#: a scope of fewer than `MAX_BATCH_NODES` x `ATTRIBUTION_LOKI_CONCURRENCY` nodes is split into about as many batches
#: as queries may run at once (a batch's pages are read one after the other), each of at least this many nodes
MIN_BATCH_NODES = 32
#: nodes of one placement query at most: it answers one series per (node, rank), and Loki refuses a query of more
#: than `max_query_series` (500 by default) series: 48 nodes leave room for 10 ranks a node
MAX_PLACEMENT_NODES = 48
#: ranks of one placement query that names them (its series: each rank on the nodes it wrote on; Loki's default
#: `max_query_series` is 500, room for each rank on three nodes)
MAX_PLACEMENT_RANKS = 128
#: ranks whose newest line is read one by one, a request (the placement query named them, no line read showed them)
MAX_LAST_LINES = 256
#: the label the placement query extracts the rank into (a name no collector gives a stream)
RANK_LABEL = "attribution_rank"
#: torchelastic's summary entry header, `[0]:`, alone on its line (white space and a collector's prefix allowed)
ENTRY_HEADER = r"\[[0-9]{1,6}\]:\s*$"
_ENTRY_HEADER = re.compile(ENTRY_HEADER)
#: what the placement query's regexp stage takes from a line (patterns.RANK_PREFIX in RE2)
RANK_PATTERN = r"\[rank(?P<" + RANK_LABEL + r">[0-9]{1,9})\]:"
#: URL bytes kept for the parameters besides the query (start, end, limit, direction, time)
_PARAMS_BYTES = 160

#: scope node -> its (ns timestamp, line) entries, in the order received
ByNode = dict[str, list[tuple[int, str]]]


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


@lru_cache(maxsize=1)
def signal_filter() -> str:
    """The line filter of the signal-lines query: `|~` with the markers as an alternation of literals (made once: the
    markers are the table's and every page of every batch sends it: 1.2 ms each time it was made, a thirtieth of the
    CPU time of a request of bench/loki_fleet.py)."""
    return " |~ " + string(literal_alternation(markers()))


def header_filter() -> str:
    return " |~ " + string(ENTRY_HEADER)


def placement_query(selector: str, seconds: int, host_label: str, ranks: Sequence[int] = ()) -> str:
    """The metric query naming each (host, rank) with `[rankN]:` lines in the `seconds` before its time: of every
    rank, or with `ranks`, of those ranks only."""
    if ranks:
        numbers = "|".join(str(r) for r in ranks)
        kept = string(r"\[rank(?:" + numbers + r")\]:")
        named = string(r"\[rank(?P<" + RANK_LABEL + ">" + numbers + r")\]:")
        inner = f"{selector} |~ {kept} | regexp {named}"
    else:
        inner = f'{selector} |= "[rank" | regexp {string(RANK_PATTERN)}'
    return f"sum by ({host_label}, {RANK_LABEL}) (count_over_time({inner} [{seconds}s]))"


def host_matcher(label: str, heads: Sequence[str]) -> str:
    """`label=~"(?i)(?:a|b)(?:\\..*)?"`: a host whose short name is one of `heads`, with any domain, any case."""
    pattern = "(?i)(?:" + "|".join(regex_escape(h) for h in heads) + r")(?:\..*)?"
    return f'{label}=~"{go_escape(pattern)}"'


def keeps(line: str) -> bool:
    """Whether the signal-lines or the entry-header query keeps `line` (what Loki's filters do, in Python)."""
    return any(m in line for m in markers()) or _ENTRY_HEADER.search(line) is not None


#: A node's entries (`[(ns, line), ...]`, oldest first; each time one `client.read_entries` accepts) as one buffer
#: for the buffer reader (`prefilter.feed_tail`): each line with Loki's time in front of it (RFC 3339, microseconds,
#: UTC: `patterns.LOKI_TIME`) and a blank, as the parser reads it, joined by newlines. A newline inside a line is what
#: the parser makes of it (a control character, shown as U+FFFD), so that the line stays one. (The answers' JSON
#: decoder refuses lone surrogates, so every line encodes.)
#: Written in C (`_loki_buffer.c`): in Python, 0.85 us a line, about a fifth of a Loki node's parse.
_joined = compiled("providers.telemetry.joblog._loki_buffer").joined


def _prefixed(log: NodeLog | None, rank: int) -> bool:
    """Whether a `[rankN]:` line of `rank` was read for the node (not only a `[Rank N]` marker)."""
    sighting = log.ranks.get(rank) if log is not None else None
    return sighting is not None and not sighting.marker_only


def _short(node: str) -> str:
    return node.lower().partition(".")[0]


@dataclass
class _Batch:
    nodes: tuple[str, ...]
    selector: str
    #: the selectors of the placement queries of the batch's nodes (each at most MAX_PLACEMENT_NODES)
    placement: tuple[str, ...] = ()


@dataclass
class _Read:
    """What the queries of one request gave, gathered on the caller's thread."""

    lines: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # node -> (ts, line), as received
    cut: bool = False
    lost: set[str] = field(default_factory=set)  # nodes a query of theirs failed for
    late: set[str] = field(default_factory=set)  # nodes a query of theirs was unfinished at the deadline
    errors: list[BaseException] = field(default_factory=list)
    placement_failed: int = 0
    unsendable: int = 0  # scope nodes whose names no LogQL string can carry (a lone surrogate): not asked for

    def add(self, entries: ByNode, fresh_only: bool = False) -> None:
        """Keep `entries`; with `fresh_only`, those not already kept (a newest line may be one the filter kept)."""
        for node, items in entries.items():
            kept = self.lines.setdefault(node, [])
            if fresh_only:
                kept.extend(item for item in items if item not in kept)
            else:
                kept.extend(items)


@dataclass(frozen=True)
class LokiJobLogSource:
    """Reads the usable job-log lines from Loki (`query_range` and `query`), batch by batch, side by side."""

    url: str
    template: str
    host_label: str = "host"
    limit: int = 5000
    max_pages: int = 10
    tenant: str | None = None
    limits: ReadLimits = ReadLimits()
    concurrency: int = 8
    max_url_bytes: int = MAX_URL_BYTES
    max_last_lines: int = MAX_LAST_LINES
    #: the entries a page asks for: `limit`, lowered to the bound Loki names when it refuses more
    entries: EntryLimit = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "entries", EntryLimit(self.limit))

    @property
    def endpoint(self) -> str:
        return self.url.rstrip("/") + "/loki/api/v1/query_range"

    @property
    def instant_endpoint(self) -> str:
        return self.url.rstrip("/") + "/loki/api/v1/query"

    # ------------------------------------------------------------ planning

    def plan(self, query: str, nodes: Sequence[str], seconds: int) -> list[_Batch]:
        """The scope's nodes in batches whose every query URL stays within `max_url_bytes`, each split into
        placement batches of at most MAX_PLACEMENT_NODES. A batch holds at most MAX_BATCH_NODES nodes, and fewer
        when the scope is small: about one batch per query the concurrency allows, at least MIN_BATCH_NODES each."""
        cap = min(MAX_BATCH_NODES, max(MIN_BATCH_NODES, -(-len(nodes) // max(1, self.concurrency))))
        empty = with_matcher(query, host_matcher(self.host_label, []))
        frame = _PARAMS_BYTES + max(
            len(self.endpoint) + encoded_length(empty + signal_filter()),
            len(self.instant_endpoint) + encoded_length(placement_query(empty, seconds, self.host_label)),
        )
        by_head: dict[str, list[str]] = {}
        for node in nodes:
            by_head.setdefault(_short(node), []).append(node)
        groups: list[list[str]] = []  # heads of each batch
        size = frame
        count = 0
        for head in sorted(by_head):
            cost = encoded_length(go_escape(regex_escape(head))) + encoded_length("|")
            if groups and groups[-1] and (size + cost > self.max_url_bytes
                                          or count + len(by_head[head]) > cap):
                groups.append([])
                size, count = frame, 0
            if not groups:
                groups.append([])
            groups[-1].append(head)
            size += cost
            count += len(by_head[head])
        batches = []
        for heads in groups:
            placement: list[tuple[str, ...]] = [()]
            placed = 0
            for head in heads:
                if placement[-1] and placed + len(by_head[head]) > MAX_PLACEMENT_NODES:
                    placement.append(())
                    placed = 0
                placement[-1] += (head,)
                placed += len(by_head[head])
            batches.append(_Batch(
                tuple(n for h in heads for n in by_head[h]),
                with_matcher(query, host_matcher(self.host_label, heads)),
                tuple(with_matcher(query, host_matcher(self.host_label, p)) for p in placement),
            ))
        return batches

    # ------------------------------------------------------------ reading

    def read(
        self,
        request: AttributionRequest,
        nodes: Sequence[str],
        window: Window,
        deadline: Deadline,
        trace: TraceContext | None,
        slots: Slots | None = None,
    ) -> JobLogs:
        """The usable lines of `nodes` in the window, parsed; with `slots`, each query also holds one of them
        (shared with the kernel-log source reading the same Loki at once)."""
        query = build_job_query(self.template, request.workload_id, request.workload_context.attempt_index)
        if query is None:
            return JobLogs({}, ("the workload id cannot be put into the Loki job-log selector: no job logs were read",))
        span = ns_span(window.start, window.end)
        if span is None or not nodes:
            return JobLogs({}, ())
        start, end = span
        headers = {"Accept": "application/json"}
        if trace is not None:
            headers.update(trace.headers())
        if self.tenant:
            headers["X-Scope-OrgID"] = self.tenant
        resolve = resolver(nodes)
        share = min(self.limits.node_bytes, max(1, self.limits.request_bytes // max(1, len(nodes))))
        seconds = (end - 1 - start) // 1_000_000_000 + 1  # the placement's range: the window, to the second above
        sendable = [node for node in nodes if representable(node)]
        batches = self.plan(query, sendable, seconds)
        got = _Read(unsendable=len(nodes) - len(sendable))
        pool = Pool(self.concurrency, until_for(deadline), "loki-job", slots)
        for b, batch in enumerate(batches):
            pool.add(partial(self._signal_lines, batch, start, end, share, headers, resolve, deadline), ("lines", b))
            pool.add(partial(self._headers, batch, start, end, headers, resolve, deadline), ("lines", b))
        lines_waiting = [2] * len(batches)  # line queries of each batch not answered yet
        lines_left = 2 * len(batches)
        wanted = set(request.scope.ranks)
        followable = set(sendable)
        logs: dict[str, NodeLog] = {}
        failed_lines = 0
        asked: set[tuple[str, int]] = set()
        unplaced = 0
        touched: set[str] = set()
        for tag, result in pool.results():
            kind, key = tag  # type: ignore[misc]
            if kind == "last":
                if isinstance(result, BaseException):
                    unplaced += 1
                else:
                    got.add({key: result}, fresh_only=True)  # type: ignore[dict-item]
                    touched.add(key)
                continue
            if kind == "placement":
                if isinstance(result, BaseException):
                    got.placement_failed += 1
                    continue
                for node, rank, host in sorted(result):  # type: ignore[call-overload]
                    if (rank not in wanted or node not in followable or node in got.lost or node in got.late
                            or (node, rank) in asked or not representable(host) or _prefixed(logs.get(node), rank)):
                        continue
                    asked.add((node, rank))
                    if len(asked) > self.max_last_lines:
                        unplaced += 1
                        continue
                    pool.add(partial(self._last_line, query, host, rank, start, end, headers, deadline),
                             ("last", node))
                continue
            batch = batches[key]
            lines_waiting[key] -= 1
            lines_left -= 1
            if isinstance(result, BaseException):
                failed_lines += 1
                (got.late if isinstance(result, NotFinished) else got.lost).update(batch.nodes)
                got.errors.append(result)
            else:
                entries, cut = result  # type: ignore[misc]
                got.add(entries)
                got.cut |= cut
            if lines_waiting[key] == 0:  # parsed while other batches are still being read
                logs.update(self._parse(batch.nodes, got, resolve))
            if lines_left == 0 and wanted:
                # Every line is in: where the ranks whose own lines were not read wrote (silent ranks)
                placements = self._placements(query, batches, logs, wanted, got, seconds)
                if time.monotonic() >= pool.until:  # the waiting is over: not sent
                    got.placement_failed += len(placements)
                    placements = []
                for placement in placements:
                    pool.add(partial(self._placement, placement, end, headers, resolve, deadline), ("placement", 0))
        if batches and failed_lines == 2 * len(batches):
            first = got.errors[0]
            if isinstance(first, NotFinished):
                raise ProviderTimeoutError(f"{SOURCE} did not answer in time")
            raise first
        logs.update(self._parse(sorted(touched), got, resolve))
        return JobLogs(logs, self._notes(got, unplaced), tuple(n for n in nodes if n in got.late))

    def _placements(
        self, query: str, batches: Sequence[_Batch], logs: dict[str, NodeLog], wanted: set[int], got: _Read,
        seconds: int,
    ) -> list[str]:
        """The placement queries for the ranks of `wanted` that no line read places: the fewer of (a) those ranks
        named, at most MAX_PLACEMENT_RANKS a query, over the job's streams, and (b) every rank, over the batches'
        nodes of at most MAX_PLACEMENT_NODES a query (the batches whose lines were read)."""
        placed = {rank for log in logs.values() for rank, s in log.ranks.items() if not s.marker_only}
        silent = sorted(wanted - placed)
        if not silent:
            return []
        by_nodes = [placement_query(selector, seconds, self.host_label) for batch in batches
                    if not all(n in got.lost or n in got.late for n in batch.nodes) for selector in batch.placement]
        room = self.max_url_bytes - _PARAMS_BYTES - len(self.instant_endpoint)
        by_ranks: list[str] = []
        chunk: list[int] = []
        size = 0
        for rank in silent:
            # each rank is written twice (the filter, the regexp): its digits and a `|` (%7C) each time
            cost = 2 * (len(str(rank)) + 3)
            if chunk and (len(chunk) == MAX_PLACEMENT_RANKS or size + cost > room):
                by_ranks.append(placement_query(query, seconds, self.host_label, chunk))
                chunk = []
                if len(by_ranks) >= len(by_nodes):
                    return by_nodes
            if not chunk:
                size = encoded_length(placement_query(query, seconds, self.host_label, [rank]))
                if size > room:
                    return by_nodes
            else:
                size += cost
            chunk.append(rank)
        by_ranks.append(placement_query(query, seconds, self.host_label, chunk))
        return by_ranks if len(by_ranks) <= len(by_nodes) else by_nodes

    def _notes(self, got: _Read, unplaced: int) -> tuple[str, ...]:
        notes = []
        if got.cut:
            notes.append("older job-log lines in Loki lie beyond the read bound and were not read")
        if got.lost:
            reasons = "; ".join(sorted({str(e) for e in got.errors if not isinstance(e, NotFinished)}))
            notes.append(f"the job-log lines of {len(got.lost)} node(s) could not be read from Loki ({reasons})")
        if got.late:
            notes.append(f"the job-log lines of {len(got.late)} node(s) were not read from Loki before the deadline")
        if got.unsendable:
            notes.append(f"the job-log lines of {got.unsendable} node(s) whose names no Loki query can carry were "
                         "not read")
        if got.placement_failed:
            notes.append(
                f"{got.placement_failed} Loki quer(ies) asking where the ranks wrote failed: on their nodes only the "
                "lines read place ranks"
            )
        if unplaced:
            notes.append(f"the newest line of {unplaced} rank(s) placed by Loki was not read: those ranks are not "
                         "placed")
        return tuple(notes)

    @staticmethod
    def _parse(nodes: Sequence[str], got: _Read, resolve: NodeResolver) -> dict[str, NodeLog]:
        logs: dict[str, NodeLog] = {}
        for node in nodes:
            lines = got.lines.get(node)
            if not lines:
                continue
            parser = NodeParser(node, resolve)
            feed_tail(parser, _joined(sorted(lines, key=lambda e: e[0])))  # stable: one instant's lines keep order
            logs[node] = parser.result()
        return logs

    # ------------------------------------------------------------ the queries (each on a thread of its own)

    def _get(self, endpoint: str, params: dict[str, str | int], headers: dict[str, str], deadline: Deadline,
             http: requests.Session | None = None) -> Any:
        url = endpoint + "?" + urlencode(params, quote_via=quote)
        if http is not None:
            return get_json(http, url, headers, deadline, None, SOURCE)
        with session(deadline) as own:
            return get_json(own, url, headers, deadline, None, SOURCE)

    def _range(
        self, params: dict[str, str | int], headers: dict[str, str], deadline: Deadline,
        http: requests.Session | None = None,
    ) -> tuple[Any, int]:
        """One `query_range` page asking for the entries a page the source asks for now: (the answer, that limit).
        A page Loki refuses for asking more than its bound is asked again once with the bound, kept for the source's
        later pages (`EntryLimit.page`)."""
        return self.entries.page(lambda limit: self._get(self.endpoint, {**params, "limit": limit}, headers, deadline,
                                                         http))

    def _signal_lines(
        self, batch: _Batch, start: int, end: int, share: int, headers: dict[str, str], resolve: NodeResolver,
        deadline: Deadline,
    ) -> tuple[ByNode, bool]:
        """The batch's marker lines, newest first in pages, each node within `share` bytes; (entries, cut)."""
        query = batch.selector + signal_filter()
        with session(deadline) as http:  # one connection for the batch's pages
            return self._pages(http, batch, query, start, end, share, headers, resolve, deadline)

    def _pages(
        self, http: requests.Session, batch: _Batch, query: str, start: int, end: int, share: int,
        headers: dict[str, str], resolve: NodeResolver, deadline: Deadline,
    ) -> tuple[ByNode, bool]:
        used: dict[str, int] = {}
        newest_first: ByNode = {}
        seen_at_end: set[tuple[str, int, str]] = set()
        nodes: dict[str, str | None] = {}  # host label value -> scope node
        cut = True
        for _ in range(self.max_pages):
            body, limit = self._range({"query": query, "start": start, "end": end, "direction": "backward"}, headers,
                                      deadline, http)
            entries, count = read_entries(body, self.host_label, SOURCE)
            if count > limit:
                raise ProviderProcessingError(
                    f"{SOURCE} answered with more entries than the limit asked for", kind=SourceFailure.MALFORMED
                )
            entries.reverse()  # newest first
            fresh = 0
            for entry in entries:
                if seen_at_end and entry in seen_at_end:  # (an empty set still hashes the entry, its line too)
                    continue
                fresh += 1
                host, ts, line = entry
                node = nodes[host] if host in nodes else nodes.setdefault(host, resolve(host))
                if node is None:
                    continue
                taken = used.get(node, 0)
                if taken >= share:
                    continue
                line = line[:MAX_LINE_CHARS]
                used[node] = taken + (len(line) if line.isascii() else len(line.encode("utf-8", "replace"))) + 1
                kept = newest_first.get(node)
                if kept is None:
                    kept = newest_first[node] = []
                kept.append((ts, line))
            if count < limit:
                cut = False
                break
            if fresh == 0 or not entries:
                break  # a whole page at one instant: no way further back
            if len(used) == len(batch.nodes) and all(v >= share for v in used.values()):
                break
            oldest = entries[-1][1]
            seen_at_end = {e for e in entries if e[1] == oldest} | (seen_at_end if oldest + 1 == end else set())
            end = oldest + 1
        return {node: kept[::-1] for node, kept in newest_first.items()}, cut

    def _headers(
        self, batch: _Batch, start: int, end: int, headers: dict[str, str], resolve: NodeResolver,
        deadline: Deadline,
    ) -> tuple[ByNode, bool]:
        """The entry headers of torchelastic's summaries in the batch (a few a node): one page, the newest."""
        body, limit = self._range({"query": batch.selector + header_filter(), "start": start, "end": end,
                                   "direction": "backward"}, headers, deadline)
        entries, count = read_entries(body, self.host_label, SOURCE)
        out: ByNode = {}
        for host, ts, line in entries:
            node = resolve(host)
            if node is not None:
                out.setdefault(node, []).append((ts, line[:MAX_LINE_CHARS]))
        return out, count >= limit

    def _placement(
        self, query: str, end: int, headers: dict[str, str], resolve: NodeResolver, deadline: Deadline,
    ) -> list[tuple[str, int, str]]:
        """(node, rank, host label value) of every rank the placement `query` finds `[rankN]:` lines of."""
        last = end - 1  # the window's last nanosecond: Loki counts over (time - range, time]
        at = f"{last // 1_000_000_000}.{last % 1_000_000_000:09d}"
        body = self._get(self.instant_endpoint, {"query": query, "time": at}, headers, deadline)
        unreadable = ProviderProcessingError(f"{SOURCE} answered with an unreadable body", kind=SourceFailure.MALFORMED)
        out = []
        for series in results(body, "vector", SOURCE):
            metric = series.get("metric") if isinstance(series, dict) else None
            if not isinstance(metric, dict):
                raise unreadable
            host, label = metric.get(self.host_label), metric.get(RANK_LABEL)
            rank = number(label, 9) if isinstance(label, str) else None
            if not isinstance(host, str) or rank is None:
                continue
            node = resolve(host)
            if node is not None:
                out.append((node, rank, host))
        return out

    def _last_line(
        self, query: str, host: str, rank: int, start: int, end: int, headers: dict[str, str], deadline: Deadline,
    ) -> list[tuple[int, str]]:
        """The newest `[rankN]:` line of one rank on one host in the window."""
        selector = with_matcher(query, f"{self.host_label}={string(host)}")
        body = self._get(self.endpoint, {"query": f"{selector} |= {string(f'[rank{rank}]:')}", "start": start,
                                         "end": end, "limit": 1, "direction": "backward"}, headers, deadline)
        entries, _ = read_entries(body, self.host_label, SOURCE)
        return [(ts, line[:MAX_LINE_CHARS]) for _, ts, line in entries[-1:]]

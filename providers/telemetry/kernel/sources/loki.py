"""The kernel signal's `loki` source: Grafana Loki's `GET /loki/api/v1/query_range`, paged forward in time.

A scope's nodes are put into as few queries as fit: one `=~` alternation of the escaped names per query, each query
URL at most `max_url_bytes` long once escaped and URL-encoded (the request-line buffer of the proxies Loki usually
sits behind is 8 KiB). The queries run side by side, at most `concurrency` at once, within the request's deadline.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from typing import Any
from urllib.parse import quote, urlencode

import requests

from providers.base import Deadline, ProviderProcessingError, ProviderTimeoutError, SourceFailure, TraceContext
from providers.telemetry.kernel.collect import Collector
from providers.telemetry.kernel.parse import parse_line
from providers.telemetry.loki.client import (
    SOURCE,
    EntryLimit,
    encoded_length,
    get_json,
    ns_span,
    read_entries,
    session,
)
from providers.telemetry.loki.fanout import NotFinished, Slots, fan_out, until_for
from providers.telemetry.loki.logql import (
    GROUP_CLOSE,
    GROUP_OPEN,
    SEPARATOR,
    SelectorTemplate,
    representable,
    split_domain,
)

log = logging.getLogger("attribution_adapter.telemetry")

DEFAULT_SELECTOR = '{host=~"{hosts}"}'
PLACEHOLDER = "{hosts}"
#: the longest query URL sent (scheme, host, path and the encoded query string)
MAX_URL_BYTES = 8 * 1024
DEFAULT_CONCURRENCY = 8
MSG_TIMEOUT = f"{SOURCE} did not answer in time"
MSG_UNREADABLE = f"{SOURCE} answered with an unreadable body"

#: (scope node, ns timestamp, line) of one Loki entry
Entry = tuple[str, int, str]


def _from_ns(value: int) -> datetime:
    return datetime.fromtimestamp(value // 1000 / 1_000_000, tz=timezone.utc)


@dataclass(frozen=True)
class QueryPlan:
    """The queries for a scope: each batch of nodes becomes one query; `unsendable` nodes are not queried."""

    batches: tuple[tuple[str, ...], ...]
    #: the LogQL query of each batch
    queries: tuple[str, ...]
    #: nodes whose own query URL would be longer than the limit, or whose name no LogQL string can carry
    unsendable: tuple[str, ...]


class LokiSource:
    """Queries Loki for the scope's hosts over the window, at most `max_pages` pages per query."""

    evidence_source = "loki"

    def __init__(
        self,
        url: str,
        selector: str | SelectorTemplate = DEFAULT_SELECTOR,
        limit: int = 5000,
        max_pages: int = 10,
        tenant: str | None = None,
        host_label: str = "host",
        concurrency: int = DEFAULT_CONCURRENCY,
        max_url_bytes: int = MAX_URL_BYTES,
    ) -> None:
        """Raises logql.TemplateError when `selector` is not a usable template for `{hosts}`."""
        self.endpoint = url.rstrip("/") + "/loki/api/v1/query_range"
        self.template = selector if isinstance(selector, SelectorTemplate) else SelectorTemplate(selector, PLACEHOLDER)
        self.selector = self.template.template
        self.limit = limit
        #: the entries a page asks for: `limit`, lowered to the bound Loki names when it refuses more
        self.entries = EntryLimit(limit)
        self.max_pages = max_pages
        self.tenant = tenant
        self.host_label = host_label
        self.concurrency = concurrency
        self.max_url_bytes = max_url_bytes

    def query_url(self, query: str, start: int | str, end: int | str, limit: int | None = None) -> str:
        """The exact URL requested for one page (what the URL limit counts: with the configured `limit`, never
        shorter than with a lower one Loki asked for)."""
        params = [("query", query), ("start", start), ("end", end), ("limit", self.limit if limit is None else limit),
                  ("direction", "forward")]
        return self.endpoint + "?" + urlencode(params, quote_via=quote)

    def _page(
        self, http: requests.Session, query: str, start: int, end: int, headers: dict[str, str], deadline: Deadline
    ) -> tuple[Any, int]:
        """One page asking for the entries a page the source asks for now: (the answer, that limit). A page Loki
        refuses for asking more than its bound is asked again once with the bound, kept for later pages."""
        return self.entries.page(lambda limit: get_json(http, self.query_url(query, start, end, limit), headers,
                                                        deadline))

    def plan(self, nodes: Sequence[str], start: int, end: int) -> QueryPlan:
        """Batch `nodes` into queries whose URLs stay within `max_url_bytes` for any page of the window.

        URL encoding and both escapings work character by character, so a query's URL length is the length of its
        frame plus the encoded length of each alternative and separator: it is counted, not guessed. Each query is
        `template.render_any(batch)`.
        """
        t = self.template
        # Every later page's `start` lies between `start` and `end`, so it is never written longer than these.
        widest = "9" * max(len(str(start)), len(str(end)))
        separator = encoded_length(SEPARATOR)
        unsendable: list[str] = []
        groups: dict[str, list[str]] = {}
        for node in nodes:
            if representable(node):
                groups.setdefault(t.quoting_for([node]), []).append(node)
            else:
                unsendable.append(node)
        batches: list[tuple[str, ...]] = []
        queries: list[str] = []
        grouping = encoded_length(GROUP_OPEN + GROUP_CLOSE)
        for quoting, group in groups.items():
            base = len(self.query_url(t.prefix(quoting) + t.suffix(quoting), widest, widest))
            domain_cost: dict[str, int] = {}
            members: list[str] = []
            size = base
            run_domain, run_length = "", 0
            # Names of one domain side by side, so that each query writes their domain once (see SelectorTemplate).
            for node in sorted(group, key=lambda n: split_domain(n)[::-1]):
                head, domain = split_domain(node)
                cost = encoded_length(t.alternative(head, quoting))
                if domain not in domain_cost:
                    domain_cost[domain] = encoded_length(t.alternative(domain, quoting))
                alone = cost + domain_cost[domain]
                if base + alone > self.max_url_bytes:
                    unsendable.append(node)
                    continue
                if members and domain and domain == run_domain:
                    extra = separator + cost + (grouping if run_length == 1 else 0)
                else:
                    extra = (separator if members else 0) + alone
                if members and size + extra > self.max_url_bytes:
                    batches.append(tuple(members))
                    queries.append(t.prefix(quoting) + t.alternation(members, quoting) + t.suffix(quoting))
                    members, size, run_domain, run_length, extra = [], base, "", 0, alone
                size += extra
                members.append(node)
                if domain and domain == run_domain:
                    run_length += 1
                else:
                    run_domain, run_length = domain, 1
            if members:
                batches.append(tuple(members))
                queries.append(t.prefix(quoting) + t.alternation(members, quoting) + t.suffix(quoting))
        return QueryPlan(tuple(batches), tuple(queries), tuple(unsendable))

    def scan(
        self, collector: Collector, deadline: Deadline, trace: TraceContext | None, slots: Slots | None = None
    ) -> None:
        """Query every batch of nodes, side by side, and feed the lines into the collector; with `slots`, each query
        also holds one of them (shared with the job-log source reading the same Loki at once).

        Nodes that could not be queried (a name too long for the URL limit, a failed query while others answered,
        a query still running when the answer is due) are marked unreadable: never unattributed, and the answer
        says so. When every query failed, the first failure is raised as the whole source's failure.
        """
        headers: dict[str, str] = {"Accept": "application/json"}
        if trace is not None:
            headers.update(trace.headers())
        if self.tenant:
            headers["X-Scope-OrgID"] = self.tenant
        span = ns_span(collector.window.start, collector.window.end)
        if span is None:
            return
        start, end = span
        plan = self.plan(sorted(set(collector.nodes)), start, end)
        if plan.unsendable:
            log.warning(
                "%d node name(s) do not fit in a Loki query of %d bytes (or hold no valid text); their kernel logs "
                "were not read",
                len(plan.unsendable),
                self.max_url_bytes,
            )
            for node in plan.unsendable:
                collector.mark_unreadable(node)
        calls = [partial(self._read_query, query, start, end, headers, collector, deadline) for query in plan.queries]
        until = until_for(deadline)
        failures: list[tuple[int, BaseException]] = []
        for index, result in fan_out(calls, self.concurrency, until, "loki-query", slots):
            if isinstance(result, BaseException):
                failures.append((index, result))
                continue
            entries, truncated = result
            _feed(collector, entries)
            collector.truncated |= truncated
        if not failures:
            return
        failures.sort(key=lambda f: f[0])
        if len(failures) == len(calls):
            first = failures[0][1]
            if isinstance(first, NotFinished):
                raise ProviderTimeoutError(MSG_TIMEOUT)
            raise first
        lost = 0
        for index, _ in failures:
            for node in plan.batches[index]:
                collector.mark_unreadable(node)
                lost += 1
        log.warning(
            "%d of %d Loki queries failed or were unfinished at the deadline (%s); %d node(s) not read",
            len(failures),
            len(calls),
            "; ".join(sorted({_describe(e) for _, e in failures})),
            lost,
        )

    def _read_query(
        self,
        query: str,
        start: int,
        end: int,
        headers: dict[str, str],
        collector: Collector,
        deadline: Deadline,
    ) -> tuple[list[Entry], bool]:
        """Every in-scope entry one query finds in the window (pages forward), and whether the page limit cut it."""
        out: list[Entry] = []
        seen_at_start: set[tuple[str, int, str]] = set()
        with session(deadline) as http:
            for _ in range(self.max_pages):
                body, limit = self._page(http, query, start, end, headers, deadline)
                entries, total = read_entries(body, self.host_label)
                if total > limit:
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
                    node = collector.node_for(host)  # a read-only lookup, safe from any thread
                    if node is not None:
                        out.append((node, ts, line))
                if total < limit:
                    return out, False
                if fresh == 0:
                    break  # a whole page at one timestamp: no way forward
                # Page forward from the last timestamp received, inclusive, so entries sharing it are not lost;
                # the ones already taken at that instant are recognised and skipped.
                seen_at_start = {k for k in page_keys if k[1] == last} | (seen_at_start if last == start else set())
                start = last
        return out, True


def _describe(error: BaseException) -> str:
    if isinstance(error, NotFinished):
        return "unfinished at the deadline"
    if isinstance(error, ProviderProcessingError):
        return str(error)
    return type(error).__name__


def _feed(collector: Collector, entries: list[Entry]) -> None:
    for node, ts, line in entries:
        parsed = parse_line(line)
        if parsed is not None and parsed.tag is not None:
            message, tag = parsed.message, parsed.tag
        else:
            message, tag = line, None
        collector.add(node, _from_ns(ts), message, line, tag)



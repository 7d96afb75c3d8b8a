"""`check` for the kernel signal's Loki source: whether Loki answers, which hosts its label names, and what a sample
of each host's lines holds, read by the source's own queries through the one Loki client. A call answered 429 or 503
is sent again as the source's queries are (the client's `session`: after `Retry-After`, at most 3 times, never past
the call's own time bound)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from providers.base import Deadline, ProviderProcessingError, ProviderTimeoutError, SourceFailure
from providers.telemetry.checking import ERROR, MAX_HOSTS_LISTED, Checker, stamp, tally
from providers.telemetry.kernel.check import BARE_MESSAGE, LineSample, line_format
from providers.telemetry.kernel.collect import Collector
from providers.telemetry.kernel.parse import ParsedLine
from providers.telemetry.kernel.sources.loki import LokiSource
from providers.telemetry.loki.client import get_json, ns_span, session
from providers.telemetry.window import Window

#: the recent window looked at, the hosts sampled in it, the lines per host, and one request's timeout
LOKI_WINDOW = timedelta(hours=24)
LOKI_MAX_HOSTS = 64
LOKI_LINES_PER_HOST = 100
LOKI_REQUEST_SECONDS = 10.0
LOKI_QUERY_PATH = "/loki/api/v1/query_range"


def _ready(url: str, headers: dict[str, str], c: Checker) -> None:
    """Loki's /ready answers 200 with a plain `ready`, not JSON: only an answer other than 200 is a problem."""
    try:
        _loki_get(url, headers, {}, c)
    except ProviderProcessingError as exc:
        if exc.kind is not SourceFailure.MALFORMED:
            raise


class _HostSample(Collector):
    """A collector that only counts what the Loki source feeds it for one host."""

    def __init__(self, host: str, window: Window, zone: tzinfo) -> None:
        super().__init__([host], window, zone=zone)
        self.sample = LineSample()

    def add(
        self, node: str, observed_at: datetime, message: str, raw: str, tag: str | None, origin: str | None = None
    ) -> None:
        fmt, parsed = line_format(raw, self.time_context) if raw else (None, None)
        if parsed is None or fmt is None:
            # A bare message: the Loki source classifies it as it is, stamped with Loki's own time.
            parsed, fmt = ParsedLine(observed_at, node, None, raw), BARE_MESSAGE
        self.sample.lines += 1
        self.sample.take(parsed, fmt)


def _loki_get(url: str, headers: dict[str, str], params: dict[str, Any], c: Checker) -> Any:
    """One small Loki API call through the Loki client, each bounded by LOKI_REQUEST_SECONDS (its retries on 429
    and 503 too); a failure is a ProviderProcessingError (kind UNREACHABLE: no answer at all) or
    ProviderTimeoutError naming the URL."""
    remaining = c.deadline.remaining()
    if remaining <= 0:
        raise ProviderTimeoutError("the check ran out of time")
    deadline = Deadline.after_ms(max(1, int(min(remaining, LOKI_REQUEST_SECONDS) * 1000)))
    try:
        with session(deadline) as http:
            return get_json(http, url, headers, deadline, params, source=f"Loki at {url}")
    except ProviderProcessingError as exc:
        if exc.kind is SourceFailure.UNREACHABLE:
            cause = type(exc.__cause__).__name__ if exc.__cause__ is not None else "no answer"
            raise ProviderProcessingError(
                f"Loki could not be reached at {url} ({cause})", kind=SourceFailure.UNREACHABLE
            ) from exc
        raise


def _loki_list(doc: Any, url: str) -> list[str]:
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        raise ProviderProcessingError(f"Loki answered {url} without a list of values")
    return sorted({v for v in data if isinstance(v, str) and v})


def check_loki(c: Checker, source: LokiSource) -> dict[str, Any]:
    """What the Loki source would read: does Loki answer, which hosts its label names, a sample of each host's lines."""
    base = source.endpoint.removesuffix(LOKI_QUERY_PATH)
    now = datetime.now(UTC)
    window = Window(now - LOKI_WINDOW, now)
    details: dict[str, Any] = {
        "source": "loki",
        "url": base,
        "host_label": source.host_label,
        "ready": None,
        "window": {"start": stamp(window.start), "end": stamp(window.end)},
        "hosts": [],
        "hosts_not_listed": 0,
    }
    c.say(f"kernel logs: Loki at {base}, label {source.host_label!r}, the last {LOKI_WINDOW}")
    headers = {"Accept": "application/json"}
    if source.tenant:
        headers["X-Scope-OrgID"] = source.tenant
    try:
        _ready(f"{base}/ready", headers, c)
        details["ready"] = "ready"
    except ProviderTimeoutError as exc:
        c.problem(ERROR, "ATTRIBUTION_LOKI_URL", f"{exc}: check the URL and the network path to Loki")
        return details
    except ProviderProcessingError as exc:
        if exc.kind is SourceFailure.UNREACHABLE:
            c.problem(ERROR, "ATTRIBUTION_LOKI_URL", f"{exc}: check the URL and the network path to Loki")
            return details
        details["ready"] = str(exc)  # a gateway in front of Loki may not serve /ready; the queries below decide
    span = dict(zip(("start", "end"), ns_span(window.start, window.end) or (0, 0), strict=True))
    values_url = f"{base}/loki/api/v1/label/{source.host_label}/values"
    try:
        hosts = _loki_list(_loki_get(values_url, headers, span, c), values_url)
        if not hosts:
            labels_url = f"{base}/loki/api/v1/labels"
            labels = _loki_list(_loki_get(labels_url, headers, span, c), labels_url)
            c.problem(
                ERROR,
                "ATTRIBUTION_LOKI_HOST_LABEL",
                f"no stream carries the label {source.host_label!r} in the last {LOKI_WINDOW}; labels seen: "
                f"{', '.join(labels[:MAX_HOSTS_LISTED]) or 'none'}: set it to the label that holds the hostname",
            )
            return details
    except (ProviderProcessingError, ProviderTimeoutError) as exc:
        c.problem(ERROR, "ATTRIBUTION_LOKI_URL", str(exc))
        return details
    sampler = LokiSource(
        base,
        selector=source.selector,
        limit=LOKI_LINES_PER_HOST,
        max_pages=1,
        tenant=source.tenant,
        host_label=source.host_label,
    )
    lines_seen = 0
    lines: list[str] = []
    for host in hosts[:LOKI_MAX_HOSTS]:
        if c.expired(host):
            break
        collector = _HostSample(host, window, c.zone)
        entry: dict[str, Any] = {"name": host, "status": "ok", "reason": None}
        try:
            sampler.scan(collector, c.deadline, None)
        except (ProviderProcessingError, ProviderTimeoutError) as exc:
            entry["status"], entry["reason"] = "failed", str(exc)
            c.problem(ERROR, host, f"the query for this host failed: {exc}")
        s = collector.sample
        lines_seen += s.lines
        entry.update(
            formats=dict(sorted(s.formats.items())),
            first=stamp(s.first),
            last=stamp(s.last),
            lines_sampled=s.lines,
            kernel_lines=s.kernel_lines,
        )
        if entry["status"] == "ok" and s.lines == 0:
            entry["status"] = "no_lines"
        details["hosts"].append(entry)
        formats = ", ".join(f"{k} {v}" for k, v in s.formats.most_common()) or "no lines"
        span_text = f"; {stamp(s.first)} .. {stamp(s.last)}" if s.first else ""
        lines.append(f"  host {host}: {entry['status']}; {formats}{span_text}")
    details["hosts_not_listed"] = max(0, len(hosts) - LOKI_MAX_HOSTS)
    queried = details["hosts"]
    statuses: dict[str, int] = {}
    for entry in queried:
        statuses[entry["status"]] = statuses.get(entry["status"], 0) + 1
    firsts = [e["first"] for e in queried if e["first"]]
    lasts = [e["last"] for e in queried if e["last"]]
    c.say(f"  hosts: {len(hosts)}, {len(queried)} queried" + (f" ({tally(statuses)})" if queried else "")
          + (f", {details['hosts_not_listed']} not queried" if details["hosts_not_listed"] else ""))
    c.say(f"  lines span {min(firsts)} .. {max(lasts)}" if firsts and lasts else "  lines span none")
    for line in lines:
        c.detail(line)
    if details["hosts_not_listed"]:
        c.detail(f"  ... and {details['hosts_not_listed']} more hosts, not queried")
    if details["hosts"] and lines_seen == 0 and not c.out_of_time:
        c.problem(
            ERROR,
            "ATTRIBUTION_LOKI_SELECTOR",
            f"matched no line of any host in the last {LOKI_WINDOW}: check that it selects the kernel log streams "
            f"and uses the label {source.host_label!r} for {{hosts}}",
        )
    return details

"""The `loki` source: query_range requests, paging, failures, and one run against a local HTTP server."""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, urlparse

import pytest
import requests
import responses

from providers.base import (
    Deadline,
    ErrorType,
    NodeTarget,
    ProviderConstructionError,
    ProviderProcessingError,
    ProviderTimeoutError,
    TraceContext,
)
from providers.telemetry import TelemetryProvider
from providers.telemetry.loki.logql import SelectorTemplate
from tests.telemetry.conftest import HEALTHY, at, deadline, make_request, rsyslog, xid
from tests.telemetry.go_strings import go_unquote

URL = "http://loki.test:3100"
ENDPOINT = URL + "/loki/api/v1/query_range"
TRACE = TraceContext("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "vendor=1")


def ns(t) -> str:
    return str(int(t.timestamp()) * 1_000_000_000 + t.microsecond * 1000)


def body(*streams: tuple[dict, list[tuple[object, str]]]) -> dict:
    return {
        "status": "success",
        "data": {
            "resultType": "streams",
            "result": [
                {"stream": labels, "values": [[ns(t), line] for t, line in values]} for labels, values in streams
            ],
            "stats": {"summary": {"totalEntriesReturned": sum(len(v) for _, v in streams)}},
        },
    }


def provider(**extra: str) -> TelemetryProvider:
    return TelemetryProvider.from_options(
        {"ATTRIBUTION_KERNEL_LOG_SOURCE": "loki", "ATTRIBUTION_LOKI_URL": URL, **extra}
    )


def test_query_escapes_hosts_for_re2_and_logql_strings() -> None:
    def build_query(template: str, hosts: list[str]) -> str:
        return SelectorTemplate(template, "{hosts}").render_any(hosts)

    assert build_query('{host=~"{hosts}"}', ["gpu-1.dc", "gpu-2"]) == '{host=~"gpu-1\\\\.dc|gpu-2"}'
    assert build_query("{host=~`{hosts}`}", ["gpu-1.dc"]) == "{host=~`gpu-1\\.dc`}"
    assert build_query('{job="syslog", host=~"{hosts}"} |= "kernel"', ["a+b"]) == (
        '{job="syslog", host=~"a\\\\+b"} |= "kernel"'
    )


@responses.activate
def test_request_shape_headers_and_finding() -> None:
    responses.get(
        ENDPOINT,
        json=body(
            ({"host": "worker-01", "transport": "kernel"}, [(at(-1), rsyslog(at(-1), "worker-01", xid(79)))]),
            ({"host": "worker-02"}, [(at(-3), "NVRM: Xid (PCI:0000:38:00): 13, pid=1, name=python3, Graphics")]),
            ({"host": "worker-02"}, [(at(-2), HEALTHY)]),
        ),
    )
    outcome = provider(ATTRIBUTION_LOKI_TENANT="team-a").fast(
        make_request(["worker-01", "worker-02", "worker-03"]), deadline(5), TRACE
    )
    assert [f.target for f in outcome.attributions] == [NodeTarget("worker-01")]
    assert outcome.attributions[0].evidence[0].source == "loki"
    assert outcome.attributions[0].evidence[0].observed_at == at(-1)
    assert outcome.unattributed_targets == (NodeTarget("worker-02"),)
    assert outcome.error is not None and outcome.error.message == "no kernel log lines for 1 of 3 nodes in the window"
    (call,) = responses.calls
    q = parse_qs(urlparse(call.request.url).query)
    assert q["query"] == ['{host=~"worker-01|worker-02|worker-03"}']
    assert q["start"] == [ns(at(-15))] and q["end"] == [str(int(ns(at(2))) + 1)]
    assert q["limit"] == ["5000"] and q["direction"] == ["forward"]
    assert call.request.headers["traceparent"] == TRACE.traceparent
    assert call.request.headers["tracestate"] == "vendor=1"
    assert call.request.headers["X-Scope-OrgID"] == "team-a"
    # The socket timeout is the time left before the deadline, computed at each wait (retries included).
    timeout = call.request.req_kwargs["timeout"]
    assert 0 < timeout.connect_timeout <= 5 and 0 < timeout.read_timeout <= 5


@responses.activate
def test_host_label_is_configurable() -> None:
    responses.get(ENDPOINT, json=body(({"hostname": "worker-01"}, [(at(-1), "NVRM: Xid (PCI:0000:07:00): 48, DBE")])))
    outcome = provider(
        ATTRIBUTION_LOKI_HOST_LABEL="hostname", ATTRIBUTION_LOKI_SELECTOR='{hostname=~"{hosts}", transport="kernel"}'
    ).fast(make_request(["worker-01"]), deadline(), None)
    assert outcome.attributions[0].error_category == "gpu_memory"
    assert "transport" in parse_qs(urlparse(responses.calls[0].request.url).query)["query"][0]


@responses.activate
def test_pages_forward_from_the_last_timestamp() -> None:
    first = [(at(-10), HEALTHY), (at(-5), HEALTHY)]
    second = [(at(-5), HEALTHY), (at(-1), "NVRM: Xid (PCI:0000:07:00): 74, NVLink: fatal error detected on link 3")]
    responses.get(ENDPOINT, json=body(({"host": "worker-01"}, first)))
    responses.get(ENDPOINT, json=body(({"host": "worker-01"}, second)))
    responses.get(ENDPOINT, json=body())
    outcome = provider(ATTRIBUTION_LOKI_LIMIT="2").fast(make_request(["worker-01"]), deadline(), None)
    assert len(responses.calls) == 3
    starts = [parse_qs(urlparse(c.request.url).query)["start"] for c in responses.calls]
    # Inclusive restart at the last timestamp: entries sharing it are not lost, the repeated one is skipped.
    assert starts == [[ns(at(-15))], [ns(at(-5))], [ns(at(-1))]]
    assert outcome.attributions[0].error_category == "nvlink"
    assert outcome.error is None


@responses.activate
def test_page_limit_reached_is_reported_and_claims_nothing_about_silent_nodes() -> None:
    for i in range(3):
        responses.get(ENDPOINT, json=body(({"host": "worker-01"}, [(at(-10 + i), HEALTHY), (at(-9 + i), HEALTHY)])))
    outcome = provider(ATTRIBUTION_LOKI_LIMIT="2", ATTRIBUTION_LOKI_MAX_PAGES="2").fast(
        make_request(["worker-01"]), deadline(), None
    )
    assert len(responses.calls) == 2
    assert outcome.unattributed_targets == ()
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY


@responses.activate
def test_empty_answer_is_insufficient_telemetry() -> None:
    responses.get(ENDPOINT, json=body())
    outcome = provider().fast(make_request(["worker-01"]), deadline(), None)
    assert outcome.attributions == () and outcome.error is not None
    assert outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"status": 500, "body": "boom"}, ProviderProcessingError, "HTTP 500"),
        ({"status": 429, "json": {"status": "error"}}, ProviderProcessingError, "HTTP 429"),
        ({"body": "not json"}, ProviderProcessingError, "unreadable"),
        ({"json": {"status": "error", "error": "parse error"}}, ProviderProcessingError, "unreadable"),
        (
            {"json": {"status": "success", "data": {"resultType": "matrix", "result": []}}},
            ProviderProcessingError,
            "unreadable",
        ),
        # an entry's time that is no int64 count of nanoseconds in ASCII digits: past year 2262, `²` (a digit
        # `int` refuses), Arabic-Indic digits (which `int` reads), 5,000 digits (more than `int` reads from text)
        *(
            ({"json": {"status": "success", "data": {"resultType": "streams", "result": [
                {"stream": {"host": "worker-01"}, "values": [[ts, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen"]]},
            ]}}}, ProviderProcessingError, "unreadable")
            for ts in (str(2**63), "10000000000000000000000", "\u00b2", "\u0661\u0662\u0663", "1" * 5000)
        ),
        ({"body": requests.ConnectionError("refused")}, ProviderProcessingError, "could not be reached"),
        ({"body": requests.ReadTimeout("slow")}, ProviderTimeoutError, "in time"),
    ],
)
@responses.activate
def test_failures(kwargs: dict, error: type, text: str) -> None:
    responses.get(ENDPOINT, **kwargs)
    with pytest.raises(error) as info:
        provider().fast(make_request(["worker-01"]), deadline(), None)
    assert text in str(info.value)
    assert "NVRM" not in str(info.value)
    assert type(info.value) is error


def _refusal(asked: int, bound: int, name: str = "max_entries_limit_per_query") -> dict:
    """Loki's answer to a query asking more entries than its tenant's bound (HTTP 400, its message as text)."""
    return {"status": 400, "body": f"max entries limit per query exceeded, limit > {name} ({asked} > {bound})\n"}


@pytest.mark.parametrize("name", ["max_entries_limit_per_query", "max_entries_limit"])  # Loki 3, Loki 2
@responses.activate
def test_a_page_refused_for_asking_more_than_lokis_bound_is_asked_again_with_the_bound(name: str) -> None:
    found = body(
        ({"host": "worker-01"}, [(at(-2), HEALTHY)]),
        ({"host": "worker-02"}, [(at(-1), rsyslog(at(-1), "worker-02", xid(79)))]),
    )
    responses.get(ENDPOINT, **_refusal(5000, 100, name))
    responses.get(ENDPOINT, json=found)
    p = provider()
    outcome = p.fast(make_request(["worker-01", "worker-02"]), deadline(), None)
    assert [f.target for f in outcome.attributions] == [NodeTarget("worker-02")] and outcome.error is None
    limits = [parse_qs(urlparse(c.request.url).query)["limit"] for c in responses.calls]
    assert limits == [["5000"], ["100"]]
    # the bound is kept: the next request asks for it at once
    responses.calls.reset()
    p.fast(make_request(["worker-01", "worker-02"], detected=at(0.5)), deadline(), None)  # a new window
    assert [parse_qs(urlparse(c.request.url).query)["limit"] for c in responses.calls] == [["100"]]


@pytest.mark.parametrize(
    "refusals",
    [
        [_refusal(5000, 9000)],  # a bound not below what was asked: nothing smaller to ask for
        [_refusal(5000, 0)],
        [_refusal(5000, 100), _refusal(100, 10)],  # asked again once, no more
        [{"status": 400, "body": "parse error at line 1, col 2: syntax error"}],  # another 400
    ],
)
@responses.activate
def test_a_refusal_that_names_no_smaller_bound_or_comes_twice_is_a_failed_query(refusals: list[dict]) -> None:
    for refusal in refusals:
        responses.get(ENDPOINT, **refusal)
    with pytest.raises(ProviderProcessingError) as info:
        provider().fast(make_request(["worker-01"]), deadline(), None)
    assert "HTTP 400" in str(info.value)
    assert len(responses.calls) == len(refusals)


def test_expired_deadline_makes_no_call() -> None:
    with responses.RequestsMock() as mock, pytest.raises(ProviderTimeoutError):
        provider().fast(make_request(["worker-01"]), Deadline(0.0), None)
    assert len(mock.calls) == 0


class _FakeLoki(BaseHTTPRequestHandler):
    """A tiny Loki stand-in: answers query_range from the lines it was given, honouring limit and start."""

    entries: list[tuple[str, str, str]] = []  # (host, ns, line)
    seen: list[dict] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        url = urlparse(self.path)
        if url.path != "/loki/api/v1/query_range":
            self.send_error(404)
            return
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        type(self).seen.append({**q, "org": self.headers.get("X-Scope-OrgID")})
        start, end, limit = int(q["start"]), int(q["end"]), int(q["limit"])
        chosen = sorted((e for e in self.entries if start <= int(e[1]) < end), key=lambda e: int(e[1]))[:limit]
        streams: dict[str, list[list[str]]] = {}
        for host, ts, line in chosen:
            streams.setdefault(host, []).append([ts, line])
        payload = json.dumps(
            {
                "status": "success",
                "data": {
                    "resultType": "streams",
                    "result": [{"stream": {"host": h}, "values": v} for h, v in streams.items()],
                    "stats": {},
                },
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass


def test_integration_against_a_local_loki_compatible_server() -> None:
    _FakeLoki.entries = [
        ("worker-01", ns(at(-14 + i * 0.1)), rsyslog(at(-14 + i * 0.1), "worker-01", HEALTHY)) for i in range(120)
    ]
    _FakeLoki.entries.append(("worker-02", ns(at(-1)), rsyslog(at(-1), "worker-02", xid(119))))
    _FakeLoki.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeLoki)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        p = TelemetryProvider.from_options(
            {
                "ATTRIBUTION_KERNEL_LOG_SOURCE": "loki",
                "ATTRIBUTION_LOKI_URL": f"http://127.0.0.1:{server.server_address[1]}/",
                "ATTRIBUTION_LOKI_LIMIT": "50",
                "ATTRIBUTION_LOKI_TENANT": "fake",
            }
        )
        outcome = p.fast(make_request(["worker-01", "worker-02"]), deadline(10), TRACE)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    assert [(f.target, f.error_category) for f in outcome.attributions] == [(NodeTarget("worker-02"), "gpu_firmware")]
    assert outcome.unattributed_targets == (NodeTarget("worker-01"),)
    assert outcome.error is None
    assert len(_FakeLoki.seen) == 3  # 121 entries at 50 a page
    assert all(s["direction"] == "forward" and s["org"] == "fake" for s in _FakeLoki.seen)


# ---------------------------------------------------------------- queries a caller cannot bend

HOSTILE = [
    'a"b',
    "a\\b",
    "a`b",
    "a|b",
    ".*",
    "gpu-1.dc",
    "new\nline",
    "tab\there",
    "cr\rhere",
    "knoten-ü-节点-🚀",
    "\u2028sep",
    "nul\x00byte",
    '"}|{job=~".+',
    "`} or {x=`",
    "\\",
    '\\"',
    "[a-z]+",
    "(?i)X",
    "x)",
    "^$",
    "{hosts}",
    "a\\|b",
]
TEMPLATES = [
    '{host=~"{hosts}"}',
    "{host=~`{hosts}`}",
    '{host="{hosts}"}',
    "{host=`{hosts}`}",
    '{job="syslog", host =~ "{hosts}", transport="kernel"} |= "NVRM" != `x"y`',
]


def split_matcher(query: str, label: str = "host") -> tuple[str, str, str, str]:
    """(text before the matcher, operator, the matcher's value, text after it) of a LogQL query."""
    found = re.search(rf"\b{label}\s*(=~|=)\s*", query)
    assert found is not None, query
    i = found.end()
    if query[i] == "`":
        j = query.index("`", i + 1)
    else:
        assert query[i] == '"', query
        j = i + 1
        while query[j] != '"':
            j += 2 if query[j] == "\\" else 1
    return query[: found.start()], found.group(1), go_unquote(query[i : j + 1]), query[j + 1 :]


def frame(template: str) -> tuple[str, str]:
    before, _, _, after = split_matcher(template.replace("{hosts}", "PLACEHOLDER"))
    return before, after


def near_misses(name: str) -> list[str]:
    return [name[:-1], name + "x", "x" + name, name + "\n", name.upper() + "Z", "", name * 2, name[1:]]


@pytest.mark.parametrize("template", TEMPLATES)
def test_an_alternation_of_hostile_names_matches_exactly_those_names(template: str) -> None:
    # Names sharing a domain are written as one group, `(?:head|head)\\.domain`: hostile heads and domains too.
    names = HOSTILE + [f"{h}.shared.d`om" for h in HOSTILE] + [f"n{i}.(?:x|y).*" for i in range(3)]
    query = SelectorTemplate(template, "{hosts}").render_any(names)
    before, op, value, after = split_matcher(query)
    assert value.count("(?:") >= 2
    # Nothing a name holds leaks out of its string: the rest of the query is the template's own text.
    assert (before, after) == frame(template)
    assert op == "=~"
    pattern = re.compile(value)  # Loki anchors a label regex at both ends: fullmatch is its meaning
    assert all(pattern.fullmatch(name) for name in names)
    candidates = [m for name in names for m in near_misses(name)] + ["a", "b", "gpu-1xdc", "anything", "X", "x"]
    candidates += [f"{h}.shared.d`om" for h in ["", "a", "x", "ab"]] + ["n1.x.*", "n1.(?:x|y).", "n3.(?:x|y).*"]
    assert [c for c in candidates if pattern.fullmatch(c) and c not in names] == []


@pytest.mark.parametrize("template", TEMPLATES)
@pytest.mark.parametrize("name", HOSTILE)
def test_one_hostile_value_round_trips_exactly(template: str, name: str) -> None:
    t = SelectorTemplate(template, "{hosts}")
    before, op, value, after = split_matcher(t.render(name))
    assert (before, after) == frame(template)
    if op == "=":
        assert value == name
    else:
        pattern = re.compile(value)
        assert pattern.fullmatch(name) and not any(pattern.fullmatch(m) for m in near_misses(name) if m != name)
    # A raw string holds printable characters only, never a backtick (Loki refuses a NUL in a query, Go drops
    # carriage returns from raw strings): any other value moves to a "..." string.
    query = t.render(name)
    closing_quote = query[len(query) - len(after) - 1]
    if "`" in name or not name.isprintable():
        assert closing_quote == '"'
    else:
        assert closing_quote == t.quoting


def test_the_job_template_of_other_sources_works_the_same() -> None:
    t = SelectorTemplate('{job="{workload_id}", stream="stdout"}', "{workload_id}")
    assert (t.label, t.operator) == ("job", "=")
    assert t.render('12"} |= "x') == '{job="12\\"} |= \\"x", stream="stdout"}'


@pytest.mark.parametrize(
    ("template", "needle"),
    [
        ('{host="a"}', "the template does not contain it"),
        ("{host=~{hosts}}", "it stands outside quotes at character 8"),
        ('{host=~"{hosts}.*"}', "here it shares its string with other text"),
        ('{host=~"{hosts}", node=~"{hosts}"}', "it appears more than once"),
        ('{job="x"} |= "{hosts}"', "inside the stream selector"),
        ('{host!~"{hosts}"}', "a negative matcher (!~) would select every other stream"),
        ('{host!="{hosts}"}', "a negative matcher (!=)"),
        ('{"{hosts}"}', "here no label name and = or =~ precede it"),
        ('{=~"{hosts}"}', "here no label name precedes =~"),
        ('{host=~"{hosts}}', "is never closed"),
    ],
)
def test_unusable_templates_are_refused_at_construction(template: str, needle: str) -> None:
    with pytest.raises(ProviderConstructionError) as info:
        provider(ATTRIBUTION_LOKI_SELECTOR=template)
    message = str(info.value)
    assert message.startswith(f"ATTRIBUTION_LOKI_SELECTOR={template!r} cannot be used: the placeholder {{hosts}}")
    assert needle in message


def test_an_unusable_template_stops_the_boot_and_says_why(start_gunicorn) -> None:
    server = start_gunicorn(
        {
            "ATTRIBUTION_PROVIDER": "telemetry",
            "ATTRIBUTION_KERNEL_LOG_SOURCE": "loki",
            "ATTRIBUTION_LOKI_URL": "http://127.0.0.1:9",
            "ATTRIBUTION_LOKI_SELECTOR": "{host=~{hosts}}",
        }
    )
    assert server.wait_exit(timeout_s=30) != 0
    assert "ATTRIBUTION_LOKI_SELECTOR='{host=~{hosts}}' cannot be used: the placeholder {hosts} must be" in (
        server.output()
    )


# ---------------------------------------------------------------- queries sized by their URL


def _sent_queries() -> list[tuple[str, str]]:
    """(URL, query) of every call the mock saw."""
    return [(c.request.url, parse_qs(urlparse(c.request.url).query)["query"][0]) for c in responses.calls]


def _names_matched(query: str, candidates: list[str]) -> set[str]:
    pattern = re.compile(split_matcher(query)[2])
    return {c for c in candidates if pattern.fullmatch(c)}


def _literal_alternatives(pattern: str) -> list[str]:
    """The names a pattern matches, which must be an alternation of escaped literals, each possibly a group of
    literal heads with one literal domain after it, `(?:a|b)\\.dc` (anything else fails the test)."""

    def literal(i: int, stops: str) -> tuple[str, int]:
        out = []
        while i < len(pattern) and pattern[i] not in stops:
            if pattern[i] == "\\":
                out.append(pattern[i + 1])
                i += 2
                continue
            assert pattern[i] not in ".+*?()[]{}^$", f"unescaped {pattern[i]!r} in {pattern!r}"
            out.append(pattern[i])
            i += 1
        return "".join(out), i

    names, i = [], 0
    while True:
        heads = [""]
        if pattern.startswith("(?:", i):
            heads, i = [], i + 3
            while True:
                head, i = literal(i, "|)")
                heads.append(head)
                i += 1
                if pattern[i - 1] == ")":
                    break
        rest, i = literal(i, "|")
        names.extend(h + rest for h in heads)
        if i >= len(pattern):
            return names
        i += 1


DOTTED = lambda i: f"{i:05d}." + "a.b" * 82  # noqa: E731 - 253 characters, a third dots (each escaped twice)
WIDE = lambda i: f"{i:05d}" + "🚀\\" * 124  # noqa: E731 - 253 code points of 4-byte UTF-8 and backslashes
PLAIN = lambda i: f"gpu-node-{i:05d}.cluster.example.internal"  # noqa: E731


@pytest.mark.parametrize(
    ("make_name", "template", "count"),
    [
        (DOTTED, '{host=~"{hosts}"}', 16384),
        (PLAIN, '{host=~"{hosts}"}', 16384),
        (PLAIN, "{host=`{hosts}`}", 16384),
        (WIDE, '{host=~"{hosts}"}', 1024),
        (WIDE, "{host=`{hosts}`}", 1024),
        (DOTTED, "{host=`{hosts}`}", 1024),
    ],
)
@responses.activate
def test_a_full_scope_of_long_names_fits_urls_of_8_kib_and_round_trips(make_name, template: str, count: int) -> None:
    nodes = [make_name(i) for i in range(count)]
    responses.get(ENDPOINT, json=body())
    outcome = provider(ATTRIBUTION_LOKI_SELECTOR=template).fast(make_request(nodes), deadline(120), None)
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY
    assert "could not be read" not in outcome.error.message  # every name was sent
    sent = _sent_queries()
    assert max(len(url) for url, _ in sent) <= 8 * 1024
    # Each query's matcher is an alternation of exactly its names (checked as a regex against them, their near
    # misses and names of other queries); together the queries cover the scope, each name once.
    covered: list[str] = []
    for number, (_, query) in enumerate(sent):
        value = split_matcher(query)[2]
        members = _literal_alternatives(value)
        pattern = re.compile(value)
        assert all(pattern.fullmatch(m) for m in members)
        others = [n for n in nodes[number % 97 :: 97] if n not in members]
        assert not any(pattern.fullmatch(x) for m in members[:20] for x in near_misses(m) if x not in members)
        assert not any(pattern.fullmatch(x) for x in others)
        covered.extend(members)
    assert sorted(covered) == sorted(nodes)
    # Few queries: every query but the last of each quoting is filled to within one name of the limit.
    total = sum(len(quote(query, safe="")) for _, query in sent)
    longest_name = max(len(quote(SelectorTemplate(template, "{hosts}").render_any([n]), safe="")) for n in nodes)
    assert len(sent) <= total // (8 * 1024 - longest_name - 200) + 2


@responses.activate
def test_each_query_goes_out_as_the_url_its_length_was_counted_for() -> None:
    # The source writes each URL's query itself (to keep it within 8 KiB) and sends it as written: byte for byte the
    # URL `query_url` counted, for names of 4-byte UTF-8, backslashes and dots.
    nodes = [WIDE(i) for i in range(40)] + [DOTTED(i) for i in range(40)] + [PLAIN(i) for i in range(40)]
    responses.get(ENDPOINT, json=body())
    loki = provider()
    loki.fast(make_request(nodes), deadline(60), None)
    assert len(responses.calls) >= 3
    for call in responses.calls:
        q = {k: v[0] for k, v in parse_qs(urlparse(call.request.url).query).items()}
        assert call.request.url == loki.settings.source.query_url(q["query"], q["start"], q["end"], int(q["limit"]))


def test_near_miss_names_are_not_selected_by_a_batch() -> None:
    nodes = [f"gpu-{i}.dc" for i in range(2000)]
    query = SelectorTemplate('{host=~"{hosts}"}', "{hosts}").render_any(nodes)
    decoys = ["gpu-1", "gpu-1.d", "gpu-1.dcx", "gpu-1Xdc", "gpu-2000.dc", "xgpu-1.dc", "gpu-1.dc|gpu-2.dc"]
    assert _names_matched(query, nodes + decoys) == set(nodes)


@responses.activate
def test_a_name_too_long_for_any_url_is_reported_and_never_sent() -> None:
    long_name = "🚀" * 3000  # 36,000 bytes once URL-encoded
    responses.get(ENDPOINT, json=body(({"host": "worker-01"}, [(at(-1), rsyslog(at(-1), "worker-01", xid(79)))])))
    outcome = provider().fast(make_request(["worker-01", long_name]), deadline(5), None)
    assert [f.target for f in outcome.attributions] == [NodeTarget("worker-01")]
    assert outcome.unattributed_targets == ()
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY
    assert "the kernel logs of 1 node(s) could not be read from Loki" in outcome.error.message
    ((_, query),) = _sent_queries()
    assert _names_matched(query, ["worker-01", long_name]) == {"worker-01"}


def test_a_scope_of_only_unsendable_names_sends_nothing() -> None:
    with responses.RequestsMock() as mock:
        outcome = provider().fast(make_request(["🚀" * 3000, "x" * 9000]), deadline(5), None)
    assert len(mock.calls) == 0
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY
    assert "the kernel logs of 2 node(s) could not be read from Loki" in outcome.error.message
    assert outcome.attributions == () and outcome.unattributed_targets == ()


# ---------------------------------------------------------------- queries side by side


class _CountingLoki(BaseHTTPRequestHandler):
    """Answers every query with no lines, after holding it until `hold` requests are in flight (at most 0.5 s)."""

    lock = threading.Condition()
    in_flight = 0
    most = 0
    calls = 0
    hold = 1

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        cls = type(self)
        with cls.lock:
            cls.in_flight += 1
            cls.calls += 1
            cls.most = max(cls.most, cls.in_flight)
            cls.lock.notify_all()
            cls.lock.wait_for(lambda: cls.in_flight >= cls.hold, timeout=0.5)
        payload = json.dumps(body()).encode()
        with cls.lock:  # counted out before the answer goes: the client's next query may come as soon as it has it
            cls.in_flight -= 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.parametrize("concurrency", [1, 3])
def test_queries_run_side_by_side_never_more_than_the_setting(concurrency: int) -> None:
    _CountingLoki.in_flight = _CountingLoki.most = _CountingLoki.calls = 0
    _CountingLoki.hold = concurrency
    server = ThreadingHTTPServer(("127.0.0.1", 0), _CountingLoki)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        p = TelemetryProvider.from_options(
            {
                "ATTRIBUTION_KERNEL_LOG_SOURCE": "loki",
                "ATTRIBUTION_LOKI_URL": f"http://127.0.0.1:{server.server_address[1]}",
                "ATTRIBUTION_LOKI_CONCURRENCY": str(concurrency),
            }
        )
        nodes = [f"gpu-node-{i:05d}.cluster.example.internal" for i in range(4000)]
        outcome = p.fast(make_request(nodes), deadline(60), None)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY
    assert "could not be read" not in outcome.error.message
    assert _CountingLoki.calls > 2 * concurrency  # enough queries to fill every slot more than once
    assert _CountingLoki.most == concurrency


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("0", "ATTRIBUTION_LOKI_CONCURRENCY=0 is out of range: it must be between 1 and 64"),
        ("65", "ATTRIBUTION_LOKI_CONCURRENCY=65 is out of range: it must be between 1 and 64"),
        ("eight", "ATTRIBUTION_LOKI_CONCURRENCY='eight' is not an integer"),
    ],
)
def test_concurrency_setting_is_checked_at_construction(value: str, needle: str) -> None:
    with pytest.raises(ProviderConstructionError) as info:
        provider(ATTRIBUTION_LOKI_CONCURRENCY=value)
    assert str(info.value) == needle


def test_concurrency_defaults_to_8() -> None:
    assert provider().settings.source.concurrency == 8
    assert provider(ATTRIBUTION_LOKI_CONCURRENCY="64").settings.source.concurrency == 64

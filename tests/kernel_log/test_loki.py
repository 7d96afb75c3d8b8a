"""The `loki` source: query_range requests, paging, failures, and one run against a local HTTP server."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
import requests
import responses

from providers.base import (
    Deadline,
    ErrorType,
    NodeTarget,
    ProviderProcessingError,
    ProviderTimeoutError,
    TraceContext,
)
from providers.kernel_log import KernelLogProvider
from providers.kernel_log.sources.logql import SelectorTemplate
from tests.kernel_log.conftest import HEALTHY, at, deadline, make_request, rsyslog, xid

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


def provider(**extra: str) -> KernelLogProvider:
    return KernelLogProvider.from_options(
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
    assert q["limit"] == ["1000"] and q["direction"] == ["forward"]
    assert call.request.headers["traceparent"] == TRACE.traceparent
    assert call.request.headers["tracestate"] == "vendor=1"
    assert call.request.headers["X-Scope-OrgID"] == "team-a"
    assert 0 < call.request.req_kwargs["timeout"] <= 5


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
        p = KernelLogProvider.from_options(
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

"""The metrics an operator alerts on, read in process from the app's registry after requests by the Flask client:
requests and provider calls in flight, the provider concurrency limit, telemetry-source failures by kind."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from app.metrics import ALERTABLE_METRICS
from providers.base import ProviderProcessingError, ProviderTimeoutError, SourceFailure
from tests.contract.conftest import NamedFakeProvider, check_200, make_client, post, valid_request
from tests.fakes import first_node_finding

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 10  # a bound on waiting for the blocked call to start, not a timing


def scrape(client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(client.application.extensions["attribution_adapter"].metrics.registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_in_flight_gauges_follow_a_provider_call_and_the_limit_is_the_setting() -> None:
    entered, release = threading.Event(), threading.Event()

    def fast(request, *_):
        entered.set()
        assert release.wait(WAIT_S)
        return first_node_finding(request)

    client = make_client(NamedFakeProvider("blocking", fast=fast), provider_concurrency=3)
    answers: list = []
    caller = threading.Thread(target=lambda: answers.append(post(client, valid_request())))
    caller.start()
    try:
        assert entered.wait(WAIT_S), "the provider call did not start"
        during = scrape(client)
    finally:
        release.set()
        caller.join(WAIT_S)
    assert value(during, "attribution_requests_in_flight") == 1
    assert value(during, "attribution_provider_calls_in_flight", provider="blocking") == 1
    assert value(during, "attribution_provider_concurrency_limit") == 3
    check_200(answers[0])
    after = scrape(client)
    assert value(after, "attribution_requests_in_flight") == 0
    assert value(after, "attribution_provider_calls_in_flight", provider="blocking") == 0
    assert value(after, "attribution_provider_concurrency_limit") == 3


def _raises(exc: BaseException):
    def fast(*_):
        raise exc

    return fast


@pytest.mark.parametrize(
    ("raised", "kind"),
    [
        (ProviderProcessingError("down", kind=SourceFailure.UNREACHABLE), "unreachable"),
        (ProviderProcessingError("bad answer", kind=SourceFailure.MALFORMED), "malformed"),
        (ProviderProcessingError("cannot read", kind=SourceFailure.UNREADABLE), "unreadable"),
        (ProviderTimeoutError("late"), "timeout"),
        (TimeoutError(), "timeout"),
        (ProviderProcessingError("no kind given"), "other"),
        (RuntimeError("a bug"), "other"),
    ],
)
def test_a_provider_failure_counts_once_under_its_kind(raised: BaseException, kind: str) -> None:
    client = make_client(NamedFakeProvider("failing", fast=_raises(raised)))
    assert post(client, valid_request()).status_code == 200
    samples = scrape(client)
    for each in SourceFailure:
        expected = 1.0 if each.value == kind else 0.0
        assert value(samples, "attribution_telemetry_source_failures_total", provider="failing", kind=each) == expected


def test_a_successful_call_counts_no_failure() -> None:
    client = make_client(NamedFakeProvider("fine"))
    check_200(post(client, valid_request()))
    samples = scrape(client)
    assert sum(v for (name, _), v in samples.items() if name == "attribution_telemetry_source_failures_total") == 0


def _alert_rules() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("<!-- alert rules -->", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    return re.findall(r"^\s+expr: (.+)$", block, flags=re.MULTILINE)


def test_the_readme_alert_rules_name_only_exported_metrics() -> None:
    client = make_client(NamedFakeProvider("fake"))
    check_200(post(client, valid_request()))
    exported = {name for name, _ in scrape(client)}
    assert set(ALERTABLE_METRICS) <= exported
    expressions = _alert_rules()
    assert len(expressions) == 2
    functions = {"sum", "rate", "max", "min", "avg"}
    for expression in expressions:
        # Drop label matchers, strings, ranges and `by (...)` groupings: what is left names functions and metrics.
        bare = re.sub(r'\{[^}]*\}|"[^"]*"|\[[^]]*\]|\bby\s*\([^)]*\)', "", expression)
        names = set(re.findall(r"\b[a-z_][a-z0-9_]*\b", bare))
        metrics = names - functions
        assert metrics and metrics <= exported, f"{expression!r} names {sorted(metrics - exported)}"


def test_the_http_request_series_are_the_exporters_own() -> None:
    """`flask_http_request_*` and `flask_exporter_info`, as prometheus-flask-exporter defines them: the duration by
    method, endpoint (the view, `None` when no route matched) and status with the client library's default buckets,
    the count by method and status, the exceptions count by method and status (none here: every error is answered)."""
    from prometheus_client import Histogram

    client = make_client(NamedFakeProvider("fake", fast=first_node_finding))
    check_200(post(client, valid_request()))
    check_200(post(client, valid_request()))
    assert post(client, {"x": 1}).status_code == 422
    assert client.get("/healthz").status_code == 200
    assert client.get("/nope").status_code == 404
    assert client.put("/v1/attribution").status_code == 405
    samples = scrape(client)
    flask = {key: v for key, v in samples.items() if key[0].startswith("flask_")}
    counts = {(name, labels): v for (name, labels), v in flask.items() if name.endswith(("_count", "_total"))}
    assert counts == {
        ("flask_http_request_duration_seconds_count", labels): n
        for labels, n in [
            ((("endpoint", "attribution.attribution"), ("method", "POST"), ("status", "200")), 2.0),
            ((("endpoint", "attribution.attribution"), ("method", "POST"), ("status", "422")), 1.0),
            ((("endpoint", "health.healthz"), ("method", "GET"), ("status", "200")), 1.0),
            ((("endpoint", "None"), ("method", "GET"), ("status", "404")), 1.0),
            ((("endpoint", "None"), ("method", "PUT"), ("status", "405")), 1.0),
        ]
    } | {
        ("flask_http_request_total", (("method", method), ("status", status))): n
        for method, status, n in [
            ("POST", "200", 2.0),
            ("POST", "422", 1.0),
            ("GET", "200", 1.0),
            ("GET", "404", 1.0),
            ("PUT", "405", 1.0),
        ]
    }
    buckets = {
        dict(labels)["le"]
        for (name, labels) in flask
        if name == "flask_http_request_duration_seconds_bucket" and dict(labels)["endpoint"] == "health.healthz"
    }
    assert buckets == {"+Inf" if b == float("inf") else str(b) for b in Histogram.DEFAULT_BUCKETS}
    assert [labels for (name, labels) in flask if name == "flask_exporter_info"] == [(("version", "0.23.2"),)]
    text = generate_latest(client.application.extensions["attribution_adapter"].metrics.registry).decode()
    assert "# TYPE flask_http_request_exceptions_total counter" in text
    assert "# HELP flask_http_request_duration_seconds Flask HTTP request duration in seconds" in text
    assert "# HELP flask_http_request_total Total number of HTTP requests" in text


def test_a_request_ending_in_an_unhandled_exception_is_counted_as_the_exporter_counts_it() -> None:
    # Every error the app meets is answered by a handler, so this is the hooks' last resort: a 500 in the exceptions
    # count, and in the duration and request counts unless the answer was counted already.
    client = make_client(NamedFakeProvider("fake", fast=first_node_finding))
    metrics = client.application.extensions["attribution_adapter"].metrics
    metrics.observe_http_exception("POST", "attribution.attribution", 0.01, answered=False)
    metrics.observe_http_exception("POST", "attribution.attribution", 0.01, answered=True)
    samples = scrape(client)
    assert value(samples, "flask_http_request_exceptions_total", method="POST", status="500") == 2
    assert value(samples, "flask_http_request_total", method="POST", status="500") == 1
    labels = {"method": "POST", "endpoint": "attribution.attribution", "status": "500"}
    assert value(samples, "flask_http_request_duration_seconds_count", **labels) == 1

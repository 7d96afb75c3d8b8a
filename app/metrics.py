"""Prometheus metrics: the exporter's HTTP metrics plus requests, provider calls, findings and an info metric.

Under gunicorn every worker writes to PROMETHEUS_MULTIPROC_DIR and the master serves the sum on its own port
(see conf/gunicorn.conf.py); without that directory (tests, a plain `flask run`) the metrics stay in process.
Labels are bounded: phase, outcome, provider, a capped set of error categories. Never ids, node names or paths.
The gauges an operator alerts on (in flight, the concurrency limit) are per process and summed over live workers
(`livesum`); a worker sets its share of the limit when it serves its first request, never in the preloading master.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

from flask import Flask
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_flask_exporter import PrometheusMetrics
from prometheus_flask_exporter.multiprocess import GunicornPrometheusMetrics

from providers.base import SourceFailure

MAX_CATEGORIES = 64
#: metric children kept per metric once looked up (their label values come from small closed sets: this only bounds
#: a surprise)
MAX_KEPT_CHILDREN = 256
OTHER_CATEGORY = "other"
CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


#: the metrics meant for alerts (the README's example rules use them)
ALERTABLE_METRICS = (
    "attribution_requests_in_flight",
    "attribution_provider_calls_in_flight",
    "attribution_provider_concurrency_limit",
    "attribution_telemetry_source_failures_total",
)


class AdapterMetrics:
    def __init__(
        self, app: Flask, *, version: str, provider: str, provider_version: str, provider_concurrency: int = 1
    ) -> None:
        registry = CollectorRegistry()
        # The exporter's default HTTP series are defined below and recorded by the app's own request hooks.
        options = {"group_by": "endpoint", "registry": registry, "export_defaults": False}
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            exporter: PrometheusMetrics = GunicornPrometheusMetrics(app, **options)
        else:
            exporter = PrometheusMetrics(app, path=None, **options)
        self.registry = registry
        # prometheus-flask-exporter's default series (`export_defaults` with group_by="endpoint"), with the same
        # names, help, labels and buckets; the app's hooks record them (`observe_http`) with each label set's
        # children looked up once, where the exporter's hooks built the label set on every request.
        self.http_duration = Histogram(
            "flask_http_request_duration_seconds",
            "Flask HTTP request duration in seconds",
            ["method", "endpoint", "status"],
            registry=registry,
        )
        self.http_total = Counter(
            "flask_http_request_total", "Total number of HTTP requests", ["method", "status"], registry=registry
        )
        self.http_exceptions = Counter(
            "flask_http_request_exceptions_total",
            "Total number of HTTP requests which resulted in an exception",
            ["method", "status"],
            registry=registry,
        )
        exporter.info(
            "flask_exporter_info", "Information about the Prometheus Flask exporter", version=exporter.version
        )
        self._http_children: dict[tuple[str, str | None, int], tuple[Any, Any]] = {}
        self.requests = Counter(
            "attribution_requests",
            "Processed attribution requests by phase and outcome (ok or the error.type).",
            ["phase", "outcome"],
            registry=registry,
        )
        self.provider_calls = Histogram(
            "attribution_provider_call_duration_seconds",
            "How long the Adapter waited for the provider, by provider and phase.",
            ["provider", "phase"],
            buckets=CALL_BUCKETS,
            registry=registry,
        )
        self.findings = Counter(
            "attribution_findings",
            "Findings returned to callers, by error_category.",
            ["error_category"],
            registry=registry,
        )
        self.requests_in_flight = Gauge(
            "attribution_requests_in_flight",
            "Requests being served now, over all workers.",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.provider_calls_in_flight = Gauge(
            "attribution_provider_calls_in_flight",
            "Provider calls running now, over all workers (a call past its timeout_ms runs on until the provider "
            "returns); compare with attribution_provider_concurrency_limit.",
            ["provider"],
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.provider_concurrency_limit = Gauge(
            "attribution_provider_concurrency_limit",
            "Provider calls that may run at once: ATTRIBUTION_PROVIDER_CONCURRENCY per worker, over the workers "
            "that have served a request.",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.source_failures = Counter(
            "attribution_telemetry_source_failures",
            "Provider calls that failed at the telemetry source, by provider and kind "
            "(unreachable, timeout, unreadable, malformed, other).",
            ["provider", "kind"],
            registry=registry,
        )
        for kind in SourceFailure:
            self.source_failures.labels(provider=provider, kind=kind.value)
        exporter.info(
            "attribution_adapter_info",
            "The Adapter's version and its provider.",
            version=version,
            provider=provider,
            provider_version=provider_version,
        )
        self.provider = provider
        self.provider_concurrency = provider_concurrency
        self._limit_pid = 0
        self._call_children: dict[str, Any] = {}
        self._request_children: dict[tuple[str, str], Any] = {}
        self._finding_children: dict[str, Any] = {}
        self._in_flight_children: dict[str, Any] = {}
        self._categories: set[str] = set()
        self._lock = threading.Lock()

    def request_started(self) -> None:
        pid = os.getpid()
        if self._limit_pid != pid:  # first request of this process: a forked worker sets its own share
            self._limit_pid = pid
            self.provider_concurrency_limit.set(self.provider_concurrency)
        self.requests_in_flight.inc()

    def request_finished(self) -> None:
        self.requests_in_flight.dec()

    def observe_http(self, method: str, endpoint: str | None, status: int, seconds: float | None) -> None:
        """One answered request: its duration (None: its start was never taken) and its count."""
        children = _child(
            self._http_children,
            (method, endpoint, status),
            lambda: (
                self.http_duration.labels(method=method, endpoint=endpoint, status=status),
                self.http_total.labels(method=method, status=status),
            ),
        )
        if seconds is not None:
            children[0].observe(seconds)
        children[1].inc()

    def observe_http_exception(self, method: str, endpoint: str | None, seconds: float | None, answered: bool) -> None:
        """A request that ended in an exception no handler took: counted as the exporter counts it, a 500 (its
        duration and count too, unless its answer was already counted)."""
        self.http_exceptions.labels(method=method, status=500).inc()
        if not answered:
            self.observe_http(method, endpoint, 500, seconds)

    def provider_call_in_flight(self) -> _InFlight:
        """A context in which one provider call is counted in `attribution_provider_calls_in_flight`."""
        provider = self.provider
        return _InFlight(
            _child(self._in_flight_children, provider, lambda: self.provider_calls_in_flight.labels(provider))
        )

    def observe_source_failure(self, kind: str) -> None:
        known = kind if kind in SourceFailure.__members__.values() else SourceFailure.OTHER.value
        self.source_failures.labels(provider=self.provider, kind=known).inc()

    def observe_provider_call(self, phase: str, seconds: float) -> None:
        _child(self._call_children, phase, lambda: self.provider_calls.labels(self.provider, phase)).observe(seconds)

    def observe_answer(self, phase: str, outcome: str, categories: list[str]) -> None:
        _child(self._request_children, (phase, outcome), lambda: self.requests.labels(phase, outcome)).inc()
        for category in categories:  # at most MAX_CATEGORIES + 1 label values (`_bounded`)
            _child(self._finding_children, category, lambda c=category: self.findings.labels(self._bounded(c))).inc()

    def _bounded(self, category: str) -> str:
        # error_category is an open token: past a cap, new values fold into one label value.
        with self._lock:
            if category in self._categories:
                return category
            if len(self._categories) < MAX_CATEGORIES:
                self._categories.add(category)
                return category
        return OTHER_CATEGORY


class _InFlight:
    """Raises a gauge while the block runs (a plain class: cheaper than a generator-based context manager)."""

    __slots__ = ("gauge",)

    def __init__(self, gauge: Any) -> None:
        self.gauge = gauge

    def __enter__(self) -> None:
        self.gauge.inc()

    def __exit__(self, *_: object) -> None:
        self.gauge.dec()


def _child(children: dict[Any, Any], key: Any, make: Callable[[], Any]) -> Any:
    """The metric child (or children) for `key`, made by `make` the first time and kept in `children` while it
    holds fewer than MAX_KEPT_CHILDREN: a label set is looked up once, not on every request."""
    child = children.get(key)
    if child is None:
        child = make()
        if len(children) < MAX_KEPT_CHILDREN:
            children[key] = child
    return child

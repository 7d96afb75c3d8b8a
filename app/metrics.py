"""Prometheus metrics: the exporter's HTTP metrics plus requests, provider calls, findings and an info metric.

Under gunicorn every worker writes to PROMETHEUS_MULTIPROC_DIR and the master serves the sum on its own port
(see conf/gunicorn.conf.py); without that directory (tests, a plain `flask run`) the metrics stay in process.
Labels are bounded: phase, outcome, provider, a capped set of error categories. Never ids, node names or paths.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from flask import Flask
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_flask_exporter import PrometheusMetrics
from prometheus_flask_exporter.multiprocess import GunicornPrometheusMetrics

MAX_CATEGORIES = 64
OTHER_CATEGORY = "other"
CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class AdapterMetrics:
    def __init__(self, app: Flask, *, version: str, provider: str, provider_version: str) -> None:
        registry = CollectorRegistry()
        options = {"group_by": "endpoint", "registry": registry}
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            exporter: PrometheusMetrics = GunicornPrometheusMetrics(app, **options)
        else:
            exporter = PrometheusMetrics(app, path=None, **options)
        self.registry = registry
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
        exporter.info(
            "attribution_adapter_info",
            "The Adapter's version and its provider.",
            version=version,
            provider=provider,
            provider_version=provider_version,
        )
        self.provider = provider
        self._call_children: dict[str, Any] = {}
        self._request_children: dict[tuple[str, str], Any] = {}
        self._categories: set[str] = set()
        self._lock = threading.Lock()

    def observe_provider_call(self, phase: str, seconds: float) -> None:
        child = self._call_children.get(phase)
        if child is None:  # label values are bounded (two phases): each child is looked up once
            child = self._call_children[phase] = self.provider_calls.labels(provider=self.provider, phase=phase)
        child.observe(seconds)

    def observe_answer(self, phase: str, outcome: str, categories: list[str]) -> None:
        child = self._request_children.get((phase, outcome))
        if child is None:  # phase x outcome is a small fixed set
            child = self._request_children[(phase, outcome)] = self.requests.labels(phase=phase, outcome=outcome)
        child.inc()
        for category in categories:
            self.findings.labels(error_category=self._bounded(category)).inc()

    def _bounded(self, category: str) -> str:
        # error_category is an open token: past a cap, new values fold into one label value.
        with self._lock:
            if category in self._categories:
                return category
            if len(self._categories) < MAX_CATEGORIES:
                self._categories.add(category)
                return category
        return OTHER_CATEGORY

"""The telemetry-source failure metric counts what a real Loki backend did wrong, by kind (a closed label set)."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from providers.base import SourceFailure
from tests.faults.conftest import URL, Backend, check_typed_error, loki_options, make_app, request_body

FAILURES = "attribution_telemetry_source_failures_total"


def failures(app) -> dict[str, float]:
    text = generate_latest(app.extensions["attribution_adapter"].metrics.registry).decode()
    return {
        sample.labels["kind"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == FAILURES and sample.labels["provider"] == "telemetry"
    }


def test_every_kind_is_exported_at_zero_before_any_failure(backend: Backend) -> None:
    app = make_app(loki_options(backend.url))
    assert failures(app) == {kind.value: 0.0 for kind in SourceFailure}


@pytest.mark.parametrize(
    ("fault", "kind"),
    [("status500", "unreadable"), ("malformed", "malformed"), ("truncated", "unreachable")],
)
def test_a_loki_failure_is_counted_by_its_kind(backend: Backend, fault: str, kind: str) -> None:
    backend.fault = fault
    app = make_app(loki_options(backend.url))
    check_typed_error(app.test_client().post(URL, json=request_body()), "service_error")
    assert failures(app) == {k.value: (1.0 if k.value == kind else 0.0) for k in SourceFailure}


def test_a_refused_connection_is_unreachable(refused_url: str) -> None:
    app = make_app(loki_options(refused_url))
    client = app.test_client()
    for _ in range(2):
        check_typed_error(client.post(URL, json=request_body()), "service_error")
    assert failures(app)["unreachable"] == 2.0

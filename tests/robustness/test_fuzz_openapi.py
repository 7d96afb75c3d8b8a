"""Schema-driven fuzzing of a real gunicorn (fake provider) from the checked-in docs/openapi.json.

schemathesis generates positive and negative data (examples, coverage and fuzzing phases) and runs every check it
has on each answer. CI mode runs `DEFAULT_EXAMPLES` examples per operation; for a deeper local run set
`ATTRIBUTION_FUZZ_EXAMPLES`, e.g. `ATTRIBUTION_FUZZ_EXAMPLES=2000`.

The document cannot express every request rule of docs/contract.md (see contract_rules.py): a schema-valid request
that breaks one of those is expected to be a 422 naming the broken field, and for that request only the
`positive_data_acceptance` check is left out. Every other failure fails the test.
"""

from __future__ import annotations

import os
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import CHECKS, is_check_class, load_all_checks
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.robustness.contract_rules import broken_rules

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_EXAMPLES = 150
EXAMPLES = int(os.environ.get("ATTRIBUTION_FUZZ_EXAMPLES", "") or DEFAULT_EXAMPLES)

load_all_checks()
ALL_CHECKS = [check for check in CHECKS.get_all() if not is_check_class(check)]
REQUIRED_CHECKS = {
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
    "positive_data_acceptance",
    "response_headers_conformance",
}

schema = schemathesis.openapi.from_path(ROOT / "docs" / "openapi.json")
schema.config.generation.update(modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE], max_examples=EXAMPLES)


def test_the_fuzzer_runs_every_check_with_positive_and_negative_data():
    assert REQUIRED_CHECKS <= {check.__name__ for check in ALL_CHECKS}
    assert set(schema.config.generation.modes) == {GenerationMode.POSITIVE, GenerationMode.NEGATIVE}
    assert {operation.ok().label for operation in schema.get_all_operations()} == {
        "GET /healthz",
        "POST /v1/attribution",
    }


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture],
)
def test_the_service_conforms_to_its_published_document(case, server):
    undocumented = broken_rules(case.body) if case.meta.generation.mode is GenerationMode.POSITIVE else set()
    excluded = [positive_data_acceptance] if undocumented else []
    response = case.call_and_validate(base_url=server.base_url, checks=ALL_CHECKS, excluded_checks=excluded)
    if undocumented:
        # Schema-valid, but against a contract rule the document cannot state: refused, on that field.
        assert response.status_code == 422, (case.body, response.text)
        detail = response.json()["detail"]
        locs = {tuple(problem["loc"]) for problem in detail if problem["type"] != "too_many_errors"}
        assert locs <= undocumented, (case.body, locs, undocumented)
        # Past 16 problems in one array a summary entry at the array counts the rest (docs/contract.md).
        summaries = {tuple(problem["loc"]) for problem in detail if problem["type"] == "too_many_errors"}
        assert all(any(loc[: len(s)] == s for loc in undocumented) for s in summaries), (summaries, undocumented)

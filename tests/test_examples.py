"""The documented examples: produced by running the service, checked in, valid for the published schemas, and
telling the truth about the contract (every `error.type`, fast and slow, a 422 and a 413)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app import examples as generator
from app.openapi import ERROR_TYPE_GUIDE, EXAMPLES_PATH, document, error_type_guide
from schemas.response import ERROR_TYPES
from tests.openapi_schema import openapi_validator

ROOT = Path(__file__).resolve().parents[1]
BLOCKING = {"timeout", "service_error", "no_attribution_available"}
SCHEMA_OF_STATUS = {200: "AttributionResponse", 413: "ErrorDetail", 422: "ValidationError"}


def _recorded() -> list[dict[str, Any]]:
    return json.loads(EXAMPLES_PATH.read_text(encoding="utf-8"))["examples"]


def _by_name() -> dict[str, dict[str, Any]]:
    return {example["name"]: example for example in _recorded()}


def test_checked_in_examples_equal_a_fresh_run_of_the_service():
    assert EXAMPLES_PATH.read_text(encoding="utf-8") == generator.render(), (
        "run `python -m app.examples`, then `make openapi`, and commit both files"
    )


def test_examples_cover_fast_slow_every_error_type_a_422_and_a_413():
    recorded = _by_name()
    answers = [e["response"] for e in recorded.values() if e["status"] == 200]
    errors = {answer["error"]["type"] for answer in answers if "error" in answer}
    assert errors == set(ERROR_TYPES)
    assert {e["status"] for e in recorded.values()} == {200, 413, 422}
    fast, slow = recorded["fast"], recorded["slow"]
    assert fast["request"]["phase"] == "fast" and fast["response"]["attributions"]
    assert "error" not in fast["response"]
    # The slow example continues the very session the fast example was given.
    assert slow["request"]["phase"] == "slow"
    assert slow["request"]["continue_session"] == fast["response"]["attribution_session_id"]
    assert slow["response"]["attribution_session_id"] == slow["request"]["continue_session"]
    assert slow["response"]["attributions"] and "error" not in slow["response"]


@pytest.mark.parametrize("example", _recorded(), ids=lambda e: e["name"])
def test_each_example_is_valid_for_the_published_schemas(example: dict[str, Any]):
    response_errors = list(openapi_validator(SCHEMA_OF_STATUS[example["status"]]).iter_errors(example["response"]))
    assert response_errors == []
    if "request" in example:
        request_errors = list(openapi_validator("AttributionRequest").iter_errors(example["request"]))
        # The 422 example's request is invalid on purpose, and the published schema says so too.
        assert bool(request_errors) is (example["status"] == 422)
    else:
        assert example["status"] == 413 and example["request_note"]


@pytest.mark.parametrize("example", [e for e in _recorded() if e["status"] == 200], ids=lambda e: e["name"])
def test_each_answer_keeps_the_contracts_invariants(example: dict[str, Any]):
    response = example["response"]
    scope = set(example["request"]["scope"]["nodes"])
    named = [t["name"] for t in response["unattributed_targets"] if t["type"] == "Node"]
    named += [f["target"]["name"] for f in response["attributions"] if f["target"]["type"] == "Node"]
    assert set(named) <= scope and len(named) == len(set(named))
    error = response.get("error")
    if error is not None and error["type"] in BLOCKING:
        assert response["attributions"] == [], "a blocking error beside findings"
    if error is not None:
        assert error["message"] and "Traceback" not in error["message"]


def test_examples_say_how_they_were_produced():
    for example in _recorded():
        assert example["produced_by"] and example["summary"]
    # Only the timeout example uses a scripted backend, and its answer names it.
    scripted = [e["name"] for e in _recorded() if "scripted" in e["produced_by"]]
    assert scripted == ["timeout"]
    assert _by_name()["timeout"]["response"]["service"]["provider"] == generator.LateBackendProvider.name


def test_the_openapi_document_shows_the_recorded_examples():
    operation = document()["paths"]["/v1/attribution"]["post"]
    for example in _recorded():
        shown = operation["responses"][str(example["status"])]["content"]["application/json"]["examples"]
        assert shown[example["name"]]["value"] == example["response"]
        assert example["produced_by"] in shown[example["name"]]["description"]
    requests = operation["requestBody"]["content"]["application/json"]["examples"]
    sent = [e["request"] for e in _recorded() if e["status"] == 200]
    assert all(value["value"] in sent for value in requests.values())


def test_no_documented_200_shows_a_blocking_error_beside_findings():
    operation = document()["paths"]["/v1/attribution"]["post"]
    for name, shown in operation["responses"]["200"]["content"]["application/json"]["examples"].items():
        value = shown["value"]
        if value.get("error", {}).get("type") in BLOCKING:
            assert value["attributions"] == [], name


def test_the_error_type_guide_covers_every_type_and_is_the_same_everywhere():
    assert [row[0] for row in ERROR_TYPE_GUIDE] == list(ERROR_TYPES)
    table = error_type_guide()
    assert table in document()["info"]["description"]
    for path in ("README.md", "docs/contract.md"):
        text = (ROOT / path).read_text(encoding="utf-8")
        assert table in text, f"{path} does not carry the error.type guide of app/openapi.py"

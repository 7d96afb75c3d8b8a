"""The OpenAPI document: checked-in copy equals a fresh export, valid, deterministic, and exported cold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from openapi_spec_validator import validate

from app.openapi import SEED_EXAMPLE, document, render
from schemas.request import AttributionRequestSchema
from tests.openapi_schema import openapi_validator

ROOT = Path(__file__).resolve().parents[1]
CHECKED_IN = ROOT / "docs" / "openapi.json"

# Makes `import fact_client` and Settings.from_env raise, then runs the export as `python -m app.openapi` would.
COLD_EXPORT = """
import importlib.abc, runpy, sys

class _NoFactClient(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "fact_client" or name.startswith("fact_client."):
            raise RuntimeError("the OpenAPI export imported fact_client")
        return None

sys.meta_path.insert(0, _NoFactClient())
import app.settings

def _refuse(*args, **kwargs):
    raise RuntimeError("the OpenAPI export constructed settings")

app.settings.Settings.from_env = _refuse
app.settings.Settings.__init__ = _refuse
app.settings.ServerSettings.from_env = _refuse
import providers
providers.load_provider = _refuse
runpy.run_module("app.openapi", run_name="__main__")
assert "fact_client" not in sys.modules
assert "providers.fact" not in sys.modules
"""


def _export(extra_env: dict[str, str], script: list[str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTRIBUTION_")} | extra_env
    return subprocess.run(
        [sys.executable, *script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_checked_in_document_equals_a_fresh_export():
    assert CHECKED_IN.read_text(encoding="utf-8") == render(), "run `make openapi` and commit docs/openapi.json"


def test_document_is_valid_openapi():
    validate(json.loads(CHECKED_IN.read_text(encoding="utf-8")))


def test_export_runs_cold_without_settings_provider_or_fact_client():
    result = _export({"ATTRIBUTION_PROVIDER": "fact"}, ["-c", COLD_EXPORT])
    assert result.returncode == 0, result.stderr
    assert result.stdout == CHECKED_IN.read_text(encoding="utf-8")


def test_export_is_byte_identical_across_hash_seeds():
    first = _export({"PYTHONHASHSEED": "1"}, ["-m", "app.openapi"])
    second = _export({"PYTHONHASHSEED": "4242"}, ["-m", "app.openapi"])
    assert first.returncode == second.returncode == 0
    assert first.stdout == second.stdout == CHECKED_IN.read_text(encoding="utf-8")


def test_document_describes_every_contract_point():
    spec = document()
    schemas = spec["components"]["schemas"]
    operation = spec["paths"]["/v1/attribution"]["post"]
    assert sorted(operation["responses"]) == ["200", "413", "422", "500"]
    assert operation["requestBody"]["content"]["application/json"]["examples"]["fast"]["value"] == SEED_EXAMPLE
    assert schemas["Target"]["discriminator"]["propertyName"] == "type"
    assert len(schemas["Target"]["oneOf"]) == 2
    scope = schemas["Scope"]["properties"]
    assert scope["nodes"]["maxItems"] == 16384 and scope["nodes"]["uniqueItems"] is True
    assert scope["nodes"]["items"] == {"type": "string", "minLength": 1, "maxLength": 253}
    assert scope["ranks"]["items"] == {"type": "integer", "minimum": 0, "maximum": 2147483647}
    assert scope["ranks"]["maxItems"] == 262144
    request = schemas["AttributionRequest"]
    assert request["additionalProperties"] is False
    assert set(request["required"]) == {
        "schema_version",
        "workload_id",
        "scope",
        "failure_context",
        "timeout_ms",
        "workload_context",
        "phase",
    }
    assert request["properties"]["timeout_ms"] == {
        **request["properties"]["timeout_ms"],
        "type": "integer",
        "minimum": 1,
        "maximum": 300000,
    }
    assert request["properties"]["schema_version"]["enum"] == ["0.1.0"]
    assert request["properties"]["continue_session"]["maxLength"] == 1024
    assert schemas["FailureContext"]["properties"]["detection_signal"]["pattern"] == "^[a-z][a-z0-9_]{0,63}$"
    assert schemas["ErrorInfo"]["properties"]["type"]["enum"] == [
        "timeout",
        "insufficient_telemetry",
        "service_error",
        "no_attribution_available",
    ]
    assert schemas["Finding"]["properties"]["evidence"]["maxItems"] == 32
    assert schemas["AttributionResponse"]["properties"]["attribution_session_id"]["nullable"] is True
    # Every property of every component says what it is.
    for name, component in schemas.items():
        assert component.get("description"), name
        for field, prop in component.get("properties", {}).items():
            assert prop.get("description"), (name, field)


def test_seed_example_is_valid_for_the_published_schema_and_the_service():
    openapi_validator("AttributionRequest").validate(SEED_EXAMPLE)
    AttributionRequestSchema().load(SEED_EXAMPLE)


@pytest.mark.parametrize(
    "target, valid",
    [
        ({"type": "Node", "name": "worker-01"}, True),
        ({"type": "AllJobResources"}, True),
        ({"type": "Node"}, False),
        ({"type": "AllJobResources", "name": "worker-01"}, False),
        ({"type": "Rack", "name": "r1"}, False),
        ({"name": "worker-01"}, False),
    ],
)
def test_published_target_union_accepts_real_targets_only(target, valid):
    errors = list(openapi_validator("Target").iter_errors(target))
    assert (not errors) is valid


def test_document_has_exactly_the_public_routes():
    paths = document()["paths"]
    assert set(paths) == {"/v1/attribution", "/healthz"}
    assert set(paths["/v1/attribution"]) == {"post"}
    assert set(paths["/healthz"]) == {"get"}


def test_document_does_not_call_healthz_a_readiness_check():
    healthz = json.dumps(document()["paths"]["/healthz"]).lower()
    assert "not a provider readiness check" in healthz


@pytest.mark.parametrize(
    "changes, valid",
    [
        ({}, True),
        ({"phase": "slow", "continue_session": "as1.x.y"}, True),
        ({"continue_session": "as1.x.y"}, False),
        ({"phase": "slow"}, False),
    ],
)
def test_published_request_states_that_continue_session_belongs_to_slow_only(changes, valid):
    errors = list(openapi_validator("AttributionRequest").iter_errors({**SEED_EXAMPLE, **changes}))
    assert (not errors) is valid

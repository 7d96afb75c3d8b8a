"""Building the FACT provider: the optional private package, its settings and the client, at boot only."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from app import create_app
from app.settings import Settings
from providers import load_provider
from providers.base import ProviderConstructionError
from providers.fact import FactProvider
from tests.fact.support import ENDPOINT, FAKE_PKG, OPTIONS

REPO = Path(__file__).resolve().parents[2]


def test_importing_the_provider_does_not_import_fact_client() -> None:
    # A fresh interpreter where fact_client IS importable: only constructing the provider may import it.
    code = (
        "import importlib.util, sys\n"
        "import providers, providers.fact\n"
        "assert importlib.util.find_spec('fact_client') is not None\n"
        "print('fact_client' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(FAKE_PKG)])}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_constructing_the_provider_imports_fact_client_and_builds_one_client(fake: ModuleType) -> None:
    del sys.modules["fact_client"]  # the fixture imported it; construction must import it itself
    provider = FactProvider.from_options(OPTIONS)
    assert "fact_client" in sys.modules
    assert provider.name == "fact"
    assert provider.version == "9.9.0-fake"
    clients = sys.modules["fact_client"].CLIENTS
    assert [client.endpoint for client in clients] == [ENDPOINT]


def test_version_is_unknown_without_dunder_version(fake: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(fake, "__version__")
    assert FactProvider.from_options(OPTIONS).version == "unknown"


@pytest.mark.parametrize(
    "build",
    [
        lambda: FactProvider.from_options(OPTIONS),
        lambda: load_provider("fact", OPTIONS),
        lambda: create_app(Settings(provider="fact", options=OPTIONS)),
    ],
    ids=["from_options", "registry", "create_app"],
)
def test_missing_package_stops_construction_naming_it_and_the_guide(build: Callable[[], object]) -> None:
    with pytest.raises(ProviderConstructionError) as raised:
        build()
    message = str(raised.value)
    assert "fact_client" in message
    assert "docs/deploy.md" in message
    assert "not installed" in message


def test_missing_package_is_reported_before_a_missing_endpoint() -> None:
    with pytest.raises(ProviderConstructionError, match="fact_client"):
        FactProvider.from_options({})


def test_package_with_a_missing_dependency_names_that_dependency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "fact_client"
    package.mkdir()
    (package / "__init__.py").write_text("import fact_transport_not_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ProviderConstructionError) as raised:
        FactProvider.from_options(OPTIONS)
    assert "fact_client" in str(raised.value)
    assert "fact_transport_not_installed" in str(raised.value)
    assert "docs/deploy.md" in str(raised.value)


def test_package_that_fails_to_import_stops_construction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "fact_client"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('licence file /etc/fact/key=abc123 unreadable')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ProviderConstructionError) as raised:
        FactProvider.from_options(OPTIONS)
    assert "fact_client failed to import (RuntimeError)" in str(raised.value)
    assert "abc123" not in str(raised.value)


@pytest.mark.parametrize("value", [None, "", "   "])
def test_missing_endpoint_names_the_variable(fake: ModuleType, value: str | None) -> None:
    options = {} if value is None else {"ATTRIBUTION_FACT_ENDPOINT": value}
    with pytest.raises(ProviderConstructionError, match="ATTRIBUTION_FACT_ENDPOINT is not set"):
        FactProvider.from_options(options)
    assert fake.CLIENTS == []


@pytest.mark.parametrize(
    "value",
    [
        "fact.internal:8443",
        "ftp://fact.internal/",
        "http://",
        "https://:8443/",
        "http://fact.internal:99999/",
        "http://fact internal/",
        "/api/attribution",
    ],
)
def test_invalid_endpoint_names_the_variable(fake: ModuleType, value: str) -> None:
    with pytest.raises(ProviderConstructionError, match="ATTRIBUTION_FACT_ENDPOINT is not a valid http\\(s\\) URL"):
        FactProvider.from_options({"ATTRIBUTION_FACT_ENDPOINT": value})
    assert fake.CLIENTS == []


def test_endpoint_with_credentials_is_refused_without_echoing_them(fake: ModuleType) -> None:
    with pytest.raises(ProviderConstructionError) as raised:
        FactProvider.from_options({"ATTRIBUTION_FACT_ENDPOINT": "https://adi:hunter2@fact.internal/"})
    assert "ATTRIBUTION_FACT_ENDPOINT must not carry credentials" in str(raised.value)
    assert "hunter2" not in str(raised.value)


@pytest.mark.parametrize("value, expected", [(None, 8), ("", 8), ("0", 0), ("3", 3), (" 32 ", 32)])
def test_max_evidence_setting(fake: ModuleType, value: str | None, expected: int) -> None:
    options = OPTIONS if value is None else {**OPTIONS, "ATTRIBUTION_FACT_MAX_EVIDENCE": value}
    assert FactProvider.from_options(options).max_evidence == expected


@pytest.mark.parametrize("value", ["-1", "33", "eight", "1.5", "+4"])
def test_invalid_max_evidence_names_the_variable(fake: ModuleType, value: str) -> None:
    with pytest.raises(ProviderConstructionError, match="ATTRIBUTION_FACT_MAX_EVIDENCE"):
        FactProvider.from_options({**OPTIONS, "ATTRIBUTION_FACT_MAX_EVIDENCE": value})


def test_client_constructor_failure_stops_construction_without_its_text(fake: ModuleType) -> None:
    fake.CONSTRUCTOR_ERROR = ValueError("cannot read token s3cr3t-token for https://fact.internal")
    with pytest.raises(ProviderConstructionError) as raised:
        load_provider("fact", OPTIONS)
    message = str(raised.value)
    assert message == "fact_client could not build a client for ATTRIBUTION_FACT_ENDPOINT (ValueError)"
    assert "s3cr3t" not in message


def test_package_without_client_stops_construction(fake: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(fake, "Client")
    with pytest.raises(ProviderConstructionError, match="fact_client has no Client"):
        FactProvider.from_options(OPTIONS)


def test_registry_builds_the_fact_provider(fake: ModuleType) -> None:
    provider = load_provider("fact", OPTIONS)
    assert isinstance(provider, FactProvider)
    assert provider.name == "fact"
    assert len(fake.CLIENTS) == 1


def test_close_closes_the_client(fake: ModuleType) -> None:
    provider = FactProvider.from_options(OPTIONS)
    provider.close()
    assert fake.CLIENTS[0].closed is True

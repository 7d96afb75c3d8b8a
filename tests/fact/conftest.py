"""Fixtures for the FACT provider tests: `fact_client` dropped around every test, the fake put on sys.path."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

from tests.fact.support import FAKE_PKG


@pytest.fixture(autouse=True)
def _no_fact_client() -> Iterator[None]:
    """Every test starts, and leaves, without `fact_client` imported: no scripted state leaks between tests."""
    # Not monkeypatch.delitem: it records nothing for an absent key, so a module imported in the test would stay.
    before = sys.modules.pop("fact_client", None)
    yield
    sys.modules.pop("fact_client", None)
    if before is not None:
        sys.modules["fact_client"] = before


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The scripted `fact_client`, importable for this test only."""
    monkeypatch.syspath_prepend(str(FAKE_PKG))
    return importlib.import_module("fact_client")

"""Fixtures for the robustness suite: one real gunicorn (fake provider) per module, plus the process suite's own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes import FAKE_PROVIDER
from tests.gunicorn_process import Gunicorn

FAKE = FAKE_PROVIDER
WORKERS = 2


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gunicorn]:
    """A real gunicorn master with two gthread workers serving the fake provider, stopped by its PID."""
    log = tmp_path_factory.mktemp("gunicorn") / "gunicorn.log"
    gunicorn = Gunicorn(
        {"ATTRIBUTION_PROVIDER": FAKE, "ATTRIBUTION_WORKERS": str(WORKERS), "ATTRIBUTION_THREADS": "4"}, log
    )
    try:
        gunicorn.wait_ready()
        yield gunicorn
    finally:
        gunicorn.stop()

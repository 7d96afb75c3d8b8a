"""Fixtures for the robustness suite: one real gunicorn (fake provider) per module, plus the process suite's own."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.process.conftest import BOOT_TIMEOUT_S, Gunicorn, start_gunicorn  # noqa: F401 - re-exported fixture

FAKE = "tests.fakes:from_options"
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
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        while len(gunicorn.worker_pids()) < WORKERS and time.monotonic() < deadline:  # bounded: both workers up
            time.sleep(0.05)
        assert len(gunicorn.worker_pids()) == WORKERS, gunicorn.output()
        yield gunicorn
    finally:
        gunicorn.stop()

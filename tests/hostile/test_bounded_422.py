"""A real gunicorn worker answers the largest bad requests with small 422s and stays within a memory bound.

One worker (fake provider) on 127.0.0.1 gets every body of tests/bounded_bodies.py, each breaking a rule as often as
the 4 MiB limit allows, one after another on one connection; its peak resident memory (VmHWM in /proc) must stay
under a generous bound. Before the bounds, the 787 KB body of one repeated rank alone kept 341 MiB in the worker.
"""

from __future__ import annotations

from pathlib import Path

import requests

from tests import bounded_bodies as shapes
from tests.fakes import FAKE_PROVIDER

MAX_PEAK_MIB = 150
MAX_ANSWER = 64 * 1024


def peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for {pid}")


def test_the_worst_422s_keep_the_worker_under_its_memory_bound(gunicorn):
    server = gunicorn({"ATTRIBUTION_PROVIDER": FAKE_PROVIDER, "ATTRIBUTION_WORKERS": "1"})
    (worker,) = server.worker_pids()
    with requests.Session() as session:
        for name in shapes.NAMES:
            answer = session.post(
                f"{server.base_url}/v1/attribution",
                data=shapes.shape_bytes(name),
                headers={"Content-Type": "application/json"},
                timeout=120,
            )
            assert answer.status_code == 422, (name, answer.text[:300])
            assert len(answer.content) < MAX_ANSWER, name
            detail = answer.json()["detail"]
            assert 1 <= len(detail) <= 65, name
        assert server.worker_pids() == {worker}, "the worker died or was replaced"
        peak = peak_mib(worker)
        print(f"worker peak RSS after every bounded-422 body: {peak:.1f} MiB")  # shown with pytest -s
        assert peak < MAX_PEAK_MIB, f"worker peak RSS {peak:.1f} MiB"
        # The worker still serves a valid request after them.
        valid = session.post(f"{server.base_url}/v1/attribution", json=shapes.valid(), timeout=30)
        assert valid.status_code == 200, valid.text[:300]

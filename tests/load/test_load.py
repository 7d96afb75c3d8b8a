"""Bounded load against a real gunicorn (2 gthread workers, 8 threads each) and a worker killed under load.

CI mode: 12 s, 16 clients. Long mode: `ATTRIBUTION_LOAD_SECONDS=60` (32 clients unless `ATTRIBUTION_LOAD_CLIENTS`).
"""

from __future__ import annotations

import collections
import os
import signal
import time

import requests

from tests.load.conftest import CLIENTS, DURATION_S, SERVER_ENV, THREADS, WORKERS, LoadRun, Outcome, RssSampler

MIB = 1024


def summary(outcomes: list[Outcome]) -> str:
    kinds = collections.Counter(o.kind for o in outcomes)
    statuses = collections.Counter(o.status for o in outcomes)
    return f"{len(outcomes)} requests, kinds {dict(kinds)}, statuses {dict(statuses)}"


def test_mixed_load_no_5xx_no_drops_and_memory_levels_off(gunicorn, record_property) -> None:
    server = gunicorn(SERVER_ENV)
    pids = server.worker_pids()
    sampler = RssSampler(server).start()
    outcomes = LoadRun(server.base_url, CLIENTS, DURATION_S).start().join()
    samples = sampler.stop()
    print(f"\nload {DURATION_S:.0f} s x {CLIENTS} clients: {summary(outcomes)}")
    record_property("requests", len(outcomes))

    dropped = [o for o in outcomes if o.status is None]
    assert not dropped, f"{len(dropped)} requests got no HTTP answer, e.g. {dropped[:3]}"
    assert not [o for o in outcomes if o.status >= 500], "a 5xx under load"
    wrong = [o.wrong for o in outcomes if o.wrong]
    assert not wrong, f"{len(wrong)} answers of the wrong kind, e.g. {wrong[:5]}"
    kinds = collections.Counter(o.kind for o in outcomes)
    assert all(kinds[k] >= CLIENTS for k in ("fast", "slow", "invalid", "slow_provider")), kinds
    assert server.worker_pids() == pids, "a worker died or was replaced under load"

    # Memory: the last third of the run may not sit well above the middle third (the first third is warm-up).
    totals = [total for _, total, _ in samples]
    assert len(totals) >= 9, f"too few RSS samples: {len(totals)}"
    third = len(totals) // 3
    middle, last = max(totals[third : 2 * third]), max(totals[2 * third :])
    allowed = max(middle * 1.2, middle + 16 * MIB)
    print(
        f"RSS master+workers (MiB): first {max(totals[:third]) / MIB:.1f}, middle {middle / MIB:.1f}, "
        f"last {last / MIB:.1f}, allowed {allowed / MIB:.1f}"
    )
    record_property("rss_middle_mib", round(middle / MIB, 1))
    record_property("rss_last_mib", round(last / MIB, 1))
    assert last <= allowed, f"RSS still growing: middle third max {middle} KiB, last third max {last} KiB"


def test_worker_killed_under_load_is_replaced_and_only_its_requests_fail(gunicorn, record_property) -> None:
    server = gunicorn(SERVER_ENV)
    before = server.worker_pids()
    assert len(before) == WORKERS
    # A new connection per request: a failure then means a request the killed worker held, never a stale
    # keep-alive connection reused later.
    run = LoadRun(server.base_url, CLIENTS, 60.0, keep_alive=False).start()
    try:
        time.sleep(3.0)
        victim = min(before)
        killed_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        replaced_at = None
        end = killed_at + 20
        while time.monotonic() < end:
            now = server.worker_pids()
            if victim not in now and len(now) == WORKERS:
                replaced_at = time.monotonic()
                break
            time.sleep(0.05)
        assert replaced_at is not None, f"the master did not replace worker {victim}: {server.worker_pids()}"
        time.sleep(3.0)
    finally:
        run.stop()
    outcomes = run.join()
    after = server.worker_pids()
    assert victim not in after and len(after) == WORKERS and len(after - before) == 1

    failed = [o for o in outcomes if o.status is None]
    print(
        f"\nSIGKILL of worker {victim}: {len(failed)} failed requests "
        f"({collections.Counter(o.failure for o in failed)}), replaced after {replaced_at - killed_at:.2f} s; "
        f"{summary(outcomes)}"
    )
    record_property("sigkill_failed_requests", len(failed))
    assert not [o for o in outcomes if o.status is not None and o.status >= 500], "a 5xx around the kill"
    assert not [o.wrong for o in outcomes if o.wrong], "an answer of the wrong kind around the kill"
    # Only requests in flight on (or queued in) the killed worker can fail.
    assert len(failed) <= THREADS + CLIENTS
    assert all(o.started < replaced_at for o in failed), "a request sent after the replacement failed"
    assert all(o.ended <= replaced_at + 1.0 or o.started < killed_at for o in failed)
    after_replacement = [o for o in outcomes if o.started >= replaced_at]
    assert len(after_replacement) >= CLIENTS, "too few requests after the replacement to show recovery"
    assert all(o.status is not None and o.wrong is None for o in after_replacement)
    assert requests.get(f"{server.base_url}/healthz", timeout=5).status_code == 200

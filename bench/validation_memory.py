"""Benchmark: a gunicorn worker's peak memory while it answers the largest bad requests with a 422.

One real gunicorn worker (fake provider) on 127.0.0.1. For each body of tests/bounded_bodies.py (each breaks a
rule as often as the 4 MiB limit allows) the worker's peak RSS (VmHWM) is reset through /proc/<pid>/clear_refs,
the body is sent once, and the new peak, the answer's size and its wall time are printed. Then the worst of them
is sent by 16 clients at once. Figures taken on a busy machine are provisional.

    .venv/bin/python bench/validation_memory.py [--concurrent 16]
"""

from __future__ import annotations

import argparse
import http.client
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._servers import start_adapter  # noqa: E402
from tests.bounded_bodies import NAMES, shape_bytes  # noqa: E402
from tests.fakes import FAKE_PROVIDER  # noqa: E402


def kib(value: str) -> int:
    return int(value.split()[0])


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of `pid`, in KiB."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {line.split(":")[0]: kib(line.split(":")[1]) for line in lines if line.startswith(("VmRSS", "VmHWM"))}


def reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # 5: reset the peak RSS to the current RSS


def post(port: int, body: bytes) -> tuple[int, int, float]:
    """(status, answer bytes, seconds) of one POST on a fresh connection."""
    started = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        connection.request("POST", "/v1/attribution", body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, len(response.read()), time.monotonic() - started
    finally:
        connection.close()


def worker_pid(server) -> int:  # noqa: ANN001 - bench._servers.Server
    (pid,) = server.worker_pids()
    return pid


def fresh_worker(tmp: str, threads: int, warm_up: bytes):  # noqa: ANN201
    """A new gunicorn with one worker that has served one request (first-request imports and caches)."""
    server = start_adapter(
        {"ATTRIBUTION_PROVIDER": FAKE_PROVIDER}, Path(tmp) / "gunicorn.log", workers=1, threads=threads
    )
    post(server.port, warm_up)
    return server, worker_pid(server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrent", type=int, default=16)
    args = parser.parse_args()
    bodies = {name: shape_bytes(name) for name in NAMES}
    warm_up = bodies["deep-nesting"]
    print(f"{'body':24} {'size':>9} {'status':>6} {'answer':>8} {'seconds':>8} {'idle RSS':>10} {'peak RSS':>10}")
    worst, worst_peak = NAMES[0], 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in NAMES:
            server, pid = fresh_worker(tmp, args.concurrent, warm_up)
            try:
                idle = memory(pid)["VmRSS"]
                reset_peak(pid)
                status, size, seconds = post(server.port, bodies[name])
                peak = memory(pid)["VmHWM"]
            finally:
                server.stop()
            if peak - idle > worst_peak:
                worst, worst_peak = name, peak - idle
            print(
                f"{name:24} {len(bodies[name]) / 1024:7.0f}KiB {status:>6} {size:>7}B {seconds:8.2f} "
                f"{idle / 1024:8.1f}MiB {peak / 1024:8.1f}MiB"
            )
        server, pid = fresh_worker(tmp, args.concurrent, warm_up)
        try:
            idle = memory(pid)["VmRSS"]
            reset_peak(pid)
            results: list[tuple[int, int, float]] = []
            started = time.monotonic()
            threads = [
                threading.Thread(target=lambda: results.append(post(server.port, bodies[worst])))
                for _ in range(args.concurrent)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(300)
            peak = memory(pid)["VmHWM"]
        finally:
            server.stop()
        statuses = sorted({status for status, _, _ in results})
        print(
            f"{args.concurrent} x {worst} at once: statuses {statuses}, answers <= "
            f"{max(size for _, size, _ in results)}B, {time.monotonic() - started:.2f} s, "
            f"idle RSS {idle / 1024:.1f} MiB, peak RSS {peak / 1024:.1f} MiB"
        )


if __name__ == "__main__":
    main()

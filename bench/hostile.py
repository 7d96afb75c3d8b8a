"""Benchmark: what hostile callers cost the Adapter under gunicorn with the project's config (1 worker x 8 threads).

Prints, each from a fresh server so that the peak is the scenario's own:
- the worker's peak RSS (VmHWM of /proc/<pid>/status) idle, after the worst 422 (a request at the 4 MiB limit whose
  scope.ranks repeats one value 262144 times), after 16 such requests at once, and after 16 of the largest valid
  requests at once;
- /healthz latency (median, max) while 64 slow connections are held (one byte; headers that never end; a body
  that stopped);
- the time until the 413 for a declared Content-Length over the limit, no body sent.

    .venv/bin/python bench/hostile.py [--healthz 50]

Figures only, no assertions; they vary with the machine's load.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._servers import Server, request_body, start_adapter  # noqa: E402
from tests.fakes import FAKE_PROVIDER  # noqa: E402

LIMIT = 4 * 1024 * 1024
RANKS = 262144


def worker_pid(server: Server) -> int:
    (child,) = server.worker_pids()
    return child


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return -1


def post(port: int, body: bytes) -> tuple[int, int]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        conn.request("POST", "/v1/attribution", body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, len(response.read())
    finally:
        conn.close()


def worst_422() -> bytes:
    body = request_body(["worker-01"], [2147483647] * RANKS)
    return json.dumps(body, separators=(",", ":")).encode()


def largest_valid() -> bytes:
    ranks = list(range(RANKS))
    body = request_body([], ranks)
    size = len(json.dumps(body, separators=(",", ":")))
    nodes: list[str] = []
    for i in range(16384):  # node names until the body is just under the limit
        name = f"node-{i:05d}-" + "x" * 90
        if size + len(name) + 3 > LIMIT:
            break
        nodes.append(name)
        size += len(name) + 3
    body["scope"]["nodes"] = nodes
    return json.dumps(body, separators=(",", ":")).encode()


def peak_after(logs: Path, name: str, body: bytes | None, at_once: int) -> None:
    server = start_adapter({"ATTRIBUTION_PROVIDER": FAKE_PROVIDER}, logs / f"{name}.log", workers=1)
    try:
        pid = worker_pid(server)
        idle = status_kib(pid, "VmHWM")
        statuses: dict[int, int] = {}
        answer_bytes = 0
        started = time.monotonic()
        if body is not None:
            with concurrent.futures.ThreadPoolExecutor(max_workers=at_once) as pool:
                for status, size in pool.map(lambda _: post(server.port, body), range(at_once)):
                    statuses[status] = statuses.get(status, 0) + 1
                    answer_bytes = max(answer_bytes, size)
        seconds = time.monotonic() - started
        peak = status_kib(pid, "VmHWM")
        sent = 0 if body is None else len(body)
        print(
            f"{name:<34} request {sent / 2**20:5.2f} MiB x{at_once:<3} statuses={statuses} "
            f"answer {answer_bytes / 2**20:6.2f} MiB  {seconds:6.2f} s  worker VmHWM idle {idle / 1024:7.1f} MiB "
            f"peak {peak / 1024:7.1f} MiB"
        )
    finally:
        server.stop()


def healthz_while_held(logs: Path, count: int, held_count: int) -> None:
    server = start_adapter({"ATTRIBUTION_PROVIDER": FAKE_PROVIDER}, logs / "held.log", workers=1)
    held: list[socket.socket] = []
    kinds = (
        b"G",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Never: ends\r\n",
        b"POST /v1/attribution HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n{",
    )
    try:
        for i in range(held_count):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
            sock.sendall(kinds[i % len(kinds)])
            held.append(sock)
        latencies = []
        unanswered = 0
        for _ in range(count):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            started = time.monotonic()
            try:
                conn.request("GET", "/healthz")
                conn.getresponse().read()
                latencies.append((time.monotonic() - started) * 1000)
            except OSError:
                unanswered += 1
                if unanswered >= 3:
                    break
            finally:
                conn.close()
        figures = (
            f"median {statistics.median(latencies):.2f} ms  max {max(latencies):.2f} ms" if latencies else "no answer"
        )
        print(
            f"/healthz with {held_count} slow connections held: {figures}  (n={len(latencies)}, "
            f"{unanswered} without an answer in 10 s, a new connection each)"
        )
    finally:
        for sock in held:
            sock.close()
        server.stop()


def time_to_413(logs: Path) -> None:
    server = start_adapter({"ATTRIBUTION_PROVIDER": FAKE_PROVIDER}, logs / "413.log", workers=1)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
            started = time.monotonic()
            sock.sendall(
                b"POST /v1/attribution HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1000000000\r\n\r\n"
            )
            first = sock.recv(4096)
            elapsed = (time.monotonic() - started) * 1000
        status_line = first.split(b"\r\n", 1)[0].decode()
        print(f"413 for Content-Length 1e9, no body sent: {elapsed:.2f} ms  ({status_line})")
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--healthz", type=int, default=50, help="how many /healthz requests to time")
    parser.add_argument("--held", type=int, default=64, help="slow connections held while /healthz is timed")
    parser.add_argument("--only", choices=("memory", "healthz", "413"), help="one part only")
    args = parser.parse_args()
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    logs = Path(tempfile.mkdtemp(prefix="bench-hostile-"))
    if args.only in (None, "memory"):
        peak_after(logs, "idle", None, 0)
        peak_after(logs, "worst 422", worst_422(), 1)
        peak_after(logs, "worst 422, 16 at once", worst_422(), 16)
        peak_after(logs, "largest valid, 16 at once", largest_valid(), 16)
    if args.only in (None, "healthz"):
        healthz_while_held(logs, args.healthz, args.held)
    if args.only in (None, "413"):
        time_to_413(logs)
    print(f"logs: {logs}")


if __name__ == "__main__":
    main()

"""The request path's cost on two checkouts, measured interleaved: bench/all.py's throughput and maximal-request
figures for a checkout before a change and one after it, with the servers of both running side by side and every
measurement taken in turn on each, so that a shared machine's drift weighs on both alike.

Each checkout runs `gunicorn -c conf/gunicorn.conf.py wsgi:app` from its own directory (with this interpreter, so
both use the same installed packages) with `telemetry` on a one-line log and with the instant fake provider. Per
round: wrk on the README's request (as bench/all.py, -t2 -c16) on each server of each checkout; then the maximal
request (just under 4 MiB) one at a time, alternating between the checkouts. Printed: the median over the rounds
of req/s and of the workers' CPU time a request, and the maximal request's median and p90 and the workers' CPU
time it took (the mean: /proc counts CPU time in ticks of 10 ms).

    git worktree add /tmp/before <commit>     # or: git archive <commit> | tar -x -C /tmp/before
    .venv/bin/python bench/compare_trees.py /tmp/before [--after .] [--rounds 5] [--seconds 5] [--max-requests 20]

Needs wrk (Debian/Ubuntu: apt-get install wrk).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._servers import ONE_LINE, ROOT, Server, base_env, free_port  # noqa: E402
from bench.all import README_REQUEST, maximal_body, post, wrk  # noqa: E402


class TreeServer(Server):
    """A gunicorn master started in `tree` (its wsgi.py, app/ and conf/), stopped by its PID."""

    def __init__(self, tree: Path, env: dict[str, str], port: int, log: Path) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self._log = open(log, "wb")  # noqa: SIM115 - closed in stop()
        args = [sys.executable, "-m", "gunicorn", "-c", "conf/gunicorn.conf.py", "wsgi:app"]
        self.process = subprocess.Popen(args, cwd=tree, env=env, stdout=self._log, stderr=subprocess.STDOUT)


def start(tree: Path, env: dict[str, str], log: Path) -> TreeServer:
    port = free_port()
    full = base_env(
        {
            "ATTRIBUTION_BIND": f"127.0.0.1:{port}",
            "ATTRIBUTION_METRICS_BIND": f"127.0.0.1:{free_port()}",
            "ATTRIBUTION_WORKERS": "2",
            "ATTRIBUTION_THREADS": "8",
            "ATTRIBUTION_LOG_LEVEL": "warning",
            "PYTHONPATH": str(tree),
            **env,
        }
    )
    server = TreeServer(tree, full, port, log)
    server.wait_ready(workers=2)
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="the checkout before the change")
    parser.add_argument("--after", type=Path, default=ROOT, help="the checkout after it (default: this one)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--max-requests", type=int, default=20, help="maximal requests per checkout and round")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("bench/compare_trees.py needs wrk on PATH (apt-get install wrk); nothing was measured")
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; before {trees['before']}, "
          f"after {trees['after']}")  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    (work / "kernel-logs" / "worker-01").mkdir(parents=True)
    (work / "kernel-logs" / "worker-01" / "kern.log").write_text(ONE_LINE)
    providers = {
        "telemetry, one-line log": {
            "ATTRIBUTION_PROVIDER": "telemetry",
            "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
            "ATTRIBUTION_KERNEL_LOG_DIR": str(work / "kernel-logs"),
        },
        "instant fake provider": {"ATTRIBUTION_PROVIDER": "tests.fakes:from_options"},
    }
    body = json.dumps(README_REQUEST).encode()
    big = maximal_body()
    servers: dict[tuple[str, str], TreeServer] = {}
    rps: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    maximal: dict[tuple[str, str], list[float]] = {}
    maximal_cpu: dict[tuple[str, str], list[float]] = {}
    try:
        for provider, env in providers.items():
            for side, tree in trees.items():
                servers[provider, side] = start(tree, env, work / f"{side}-{len(servers)}.log")
        for _ in range(args.rounds):
            for key, server in servers.items():
                figures = wrk(server, body, args.seconds, work)
                rps.setdefault(key, []).append(figures["rps"])
                cpu.setdefault(key, []).append(figures["cpu_us"])
            for provider in providers:
                for key in [(provider, "before"), (provider, "after")]:
                    post(servers[key].port, big)  # warm-up
                for _ in range(args.max_requests):
                    for key in [(provider, "before"), (provider, "after")]:
                        used = sum(servers[key].worker_cpu().values())
                        status, _, ms = post(servers[key].port, big)
                        assert status == 200, status
                        maximal.setdefault(key, []).append(ms)
                        used = sum(servers[key].worker_cpu().values()) - used
                        maximal_cpu.setdefault(key, []).append(used * 1000)
    finally:
        for server in servers.values():
            server.stop()
    print(f"\nthroughput: wrk -t2 -c16 -d{args.seconds:g}s, the README's request, 2 workers x 8 threads; median of "
          f"{args.rounds} rounds (all rounds in brackets)")  # fmt: skip
    print(f"   {'server':28s} {'side':6s} {'req/s':>7s} {'CPU us':>7s}  rounds: req/s")
    for key in servers:
        rounds = ", ".join(f"{r:.0f}" for r in rps[key])
        print(f"   {key[0]:28s} {key[1]:6s} {statistics.median(rps[key]):7.0f} {statistics.median(cpu[key]):7.0f}"
              f"  [{rounds}]")  # fmt: skip
    print(f"\nmaximal request ({len(big):,} B), one at a time, alternating: {args.rounds * args.max_requests} each")
    for key in servers:
        times = sorted(maximal[key])
        p90 = times[min(len(times) - 1, int(0.9 * len(times)))]
        print(f"   {key[0]:28s} {key[1]:6s} median {statistics.median(times):6.1f} ms  p90 {p90:6.1f} ms  "
              f"workers' CPU {statistics.mean(maximal_cpu[key]):6.1f} ms a request (mean)")  # fmt: skip


if __name__ == "__main__":
    main()

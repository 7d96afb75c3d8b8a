"""Every benchmark figure in one run (`make bench`): HTTP throughput against a bare Flask endpoint, the maximal
request over HTTP, the workers' peak memory, then the provider benchmarks.

1. Throughput: wrk (2 threads, 16 connections, `--seconds` each) POSTs the README's request to
   - a bare Flask JSON endpoint (bench/bare_app.py: parse the body, answer a fixed small JSON),
   - the Adapter with `telemetry` on a one-line kernel log (the same request repeated, then on the same server a new
     failure time in every request, so that no kept answer serves it), and on the sample logs in conf/samples,
   - the Adapter with `fact` talking HTTP to a local stub backend (bench/fact_stub.py),
   - the Adapter with the instant fake provider (what the Adapter itself costs),
   every server started by `gunicorn -c conf/gunicorn.conf.py` on 127.0.0.1 (the project's settings: the same
   worker class, workers, threads and keep-alive for all) and stopped by its PID. Printed as ratios to bare Flask.
   The bare endpoint and `telemetry` on the one-line log (the goal's two figures) run side by side and are measured
   in turn for `--rounds` rounds; each of their rows is the round of median req/s, so a drift of the machine's speed
   during the run (a shared host's) weighs on both alike.
2. The maximal request (16,384 nodes, 262,144 ranks, just under the 4 MiB body limit) over HTTP, one at a time:
   median and p90 of `--max-requests` requests, with `telemetry` on the one-line log and with the fake.
3. Peak RSS (VmHWM) of each Adapter's workers after its runs.
4. `bench/kernel_scan.py --quick` and `bench/loki_scope.py` (when present), run as they are.

    .venv/bin/python bench/all.py [--seconds 10] [--rounds 3] [--max-requests 30] [--skip-providers]

wrk must be installed (Debian/Ubuntu: `apt-get install wrk`). The goals printed beside the figures: throughput with
`telemetry` on a small log at least 0.8x the bare endpoint; the maximal request at most 50 ms median.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.openapi import SEED_EXAMPLE  # noqa: E402
from bench._servers import DETECTED_AT, ONE_LINE, ROOT, Server, base_env, free_port, with_failure_time  # noqa: E402

LIMIT = 4 * 1024 * 1024
MAX_NODES, MAX_RANKS = 16384, 262144
GOAL_THROUGHPUT = 0.8
GOAL_MAXIMAL_MS = 50.0
#: the README's request (the seed's example, as the OpenAPI document carries it)
README_REQUEST = SEED_EXAMPLE
FACT_CLIENT = ROOT / "tests" / "faults" / "fact_http_pkg"


def start(app: str, env: dict[str, str], log: Path, workers: int, threads: int) -> Server:
    """`gunicorn -c conf/gunicorn.conf.py <app>` on free 127.0.0.1 ports, ready with all its workers."""
    port = free_port()
    full = base_env(
        {
            "ATTRIBUTION_BIND": f"127.0.0.1:{port}",
            "ATTRIBUTION_METRICS_BIND": f"127.0.0.1:{free_port()}",
            "ATTRIBUTION_WORKERS": str(workers),
            "ATTRIBUTION_THREADS": str(threads),
            **env,
        }
    )
    server = Server(["-c", "conf/gunicorn.conf.py", app], full, port, log)
    server.wait_ready(workers=workers)
    return server


def wrk(server: Server, body: bytes, seconds: float, scripts: Path, vary: bool = False) -> dict[str, float]:
    """wrk -t2 -c16 POSTing `body`: requests/s, latency percentiles (ms), the count of non-2xx answers and the
    server's CPU time a request (`cpu_us`: what its workers used over the run, user and system, divided by the
    requests wrk counted; NaN when a worker was replaced during the run).

    req/s on a shared 2-core machine moves with whatever else runs; the CPU a request costs the server moves less,
    and on a machine the load generator and the server share, it is what sets the req/s.

    `vary`: every request has its own failure time (12:00:00 and a distinct count of microseconds after it, per wrk
    thread and request), so no two ask the same question and no answer kept for a repeated request is used.
    """
    script = scripts / "post.lua"
    lines = ["wrk.method = 'POST'", "wrk.headers['Content-Type'] = 'application/json'"]
    if vary:
        head, tail = body.split(DETECTED_AT)
        lines += [
            f"head, tail = {json.dumps(head.decode())}, {json.dumps(tail.decode())}",
            "threads = 0",
            "function setup(thread) thread:set('first', threads * 1000000); threads = threads + 1 end",
            "function init(args) n = first end",
            "function request()",
            "  n = n + 1",
            "  local at = string.format('\"2026-09-09T12:00:%02d.%06dZ\"', math.floor(n / 1000000) % 60, n % 1000000)",
            "  return wrk.format(nil, nil, nil, head .. at .. tail)",
            "end",
        ]
    else:
        lines.append(f"wrk.body = {json.dumps(body.decode())}")
    script.write_text("\n".join(lines) + "\n")
    args = ["wrk", "-t2", "-c16", f"-d{seconds:g}s", "--latency", "-s", str(script), server.url + "/v1/attribution"]
    before = server.worker_cpu()
    out = subprocess.run(args, capture_output=True, text=True, timeout=seconds + 60, check=True).stdout
    after = server.worker_cpu()
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    figures = {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))}
    same_workers = before.keys() == after.keys() and requests > 0
    used = sum(after.values()) - sum(before.values())
    figures["cpu_us"] = used / requests * 1e6 if same_workers else float("nan")
    for q in ("50", "90", "99"):
        match = re.search(rf"^\s+{q}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if match:
            figures[f"p{q}"] = float(match.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[match.group(2)]
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors:.*", out)
    figures["non2xx"] = float(non2xx.group(1)) if non2xx else 0.0
    figures["socket_errors"] = errors.group(0) if errors else ""
    return figures


def post(port: int, body: bytes) -> tuple[int, bytes, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        started = time.perf_counter()
        conn.request("POST", "/v1/attribution", body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        payload = response.read()
        return response.status, payload, (time.perf_counter() - started) * 1000
    finally:
        conn.close()


def answer_kind(port: int, body: bytes) -> str:
    """What one answer holds, so a ratio is never taken over error answers unawares."""
    status, payload, _ = post(port, body)
    if status != 200:
        return f"HTTP {status}"
    data = json.loads(payload)
    error = data.get("error", {}).get("type")
    return f"{len(data['attributions'])} finding(s)" + (f", error {error}" if error else "")


def peak_rss_mib(server: Server) -> list[float]:
    peaks = []
    for child in server.worker_pids():
        status = Path(f"/proc/{child}/status").read_text()
        peaks.append(int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024)
    return peaks


def maximal_body(timeout_ms: int = 10000) -> bytes:
    """16,384 nodes (names padded to fill the body just under 4 MiB) and 262,144 ranks."""
    ranks = list(range(MAX_RANKS))

    def body(nodes: list[str]) -> bytes:
        return json.dumps(
            {**README_REQUEST, "timeout_ms": timeout_ms, "scope": {"nodes": nodes, "ranks": ranks}}
        ).encode()

    base = len(body([f"worker-{i:05d}-" for i in range(MAX_NODES)]))
    pad = min(253 - 13, (LIMIT - 4096 - base) // MAX_NODES)
    # The first node is the one the one-line log and the fake find something on; the rest are unattributed.
    data = body(["worker-01"] + [f"worker-{i:05d}-" + "x" * pad for i in range(1, MAX_NODES)])
    assert len(data) <= LIMIT, len(data)
    return data


def maximal(port: int, body: bytes, n: int) -> str:
    post(port, body)  # warm-up
    times, statuses, sizes = [], set(), set()
    for _ in range(n):
        status, payload, ms = post(port, body)
        times.append(ms)
        statuses.add(status)
        sizes.add(len(payload))
    ordered = sorted(times)
    median, p90 = statistics.median(ordered), ordered[min(n - 1, int(0.9 * n))]
    goal = "meets" if median <= GOAL_MAXIMAL_MS else "misses"
    return (
        f"median {median:7.1f} ms  p90 {p90:7.1f} ms  (n={n}, statuses {sorted(statuses)}, answer "
        f"{max(sizes):,} B)  goal <= {GOAL_MAXIMAL_MS:.0f} ms median: {goal}"
    )


def rss(server: Server) -> str:
    return "/".join(f"{mib:.0f}" for mib in peak_rss_mib(server)) + " MiB"


def print_row(name: str, figures: dict[str, float], bare: dict[str, float], rest: str) -> None:
    extra = f", {int(figures['non2xx'])} non-2xx" if figures["non2xx"] else ""
    print(
        f"   {name:28s} {figures['rps']:8.0f} {figures['rps'] / bare['rps']:6.2f}x {figures.get('p50', 0):7.2f} "
        f"{figures.get('p99', 0):7.2f} {figures['cpu_us']:7.0f} {figures['cpu_us'] - bare['cpu_us']:+6.0f}  "
        f"{rest}{extra}",
        flush=True,
    )


def run_script(args: list[str]) -> None:
    print(f"\n$ {' '.join(args)}", flush=True)
    done = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    print((done.stdout + done.stderr).rstrip() or "(no output)")
    if done.returncode:
        print(f"(exited {done.returncode})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="wrk duration of each throughput run")
    parser.add_argument("--max-requests", type=int, default=30, help="maximal requests measured one at a time")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the bare and one-line-log throughput runs")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--skip-providers", action="store_true", help="leave out the provider benchmarks (part 4)")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("bench/all.py needs wrk on PATH (Debian/Ubuntu: apt-get install wrk); nothing was measured")
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} (figures on a busy machine vary)")
    print(
        f"goals: telemetry on a small log >= {GOAL_THROUGHPUT}x bare Flask throughput; "
        f"maximal request <= {GOAL_MAXIMAL_MS:.0f} ms median"
    )
    work = Path(tempfile.mkdtemp(prefix="bench-all-"))
    one_line = work / "kernel-logs"
    (one_line / "worker-01").mkdir(parents=True)
    (one_line / "worker-01" / "kern.log").write_text(ONE_LINE)
    body = json.dumps(README_REQUEST).encode()
    quiet = {"ATTRIBUTION_LOG_LEVEL": "warning"}
    kernel_files = {"ATTRIBUTION_PROVIDER": "telemetry", "ATTRIBUTION_KERNEL_LOG_SOURCE": "files"}
    setups = [
        ("bare Flask endpoint", "bench.bare_app:app", {}),
        ("telemetry, one-line log", "wsgi:app", {**kernel_files, "ATTRIBUTION_KERNEL_LOG_DIR": str(one_line)}),
        (
            "telemetry, conf/samples",
            "wsgi:app",
            {**kernel_files, "ATTRIBUTION_KERNEL_LOG_DIR": str(ROOT / "conf" / "samples" / "kernel-logs")},
        ),
        ("fact, local stub backend", "wsgi:app", {"ATTRIBUTION_PROVIDER": "fact"}),
        ("instant fake provider", "wsgi:app", {"ATTRIBUTION_PROVIDER": "tests.fakes:from_options"}),
    ]
    print(f"\n1. throughput: wrk -t2 -c16 -d{args.seconds:g}s, the README's request, {args.workers} workers x "
          f"{args.threads} threads, logs at warning  (server logs in {work})")  # fmt: skip
    print(f"   the first three rows: {args.rounds} rounds taken in turn on servers running side by side, each row the "
          f"round of median req/s (the others' req/s and CPU in brackets); the rest one run each")  # fmt: skip
    print("   CPU us: the server's workers' CPU time (user + system) a request; + bare: the CPU a request costs beyond "
          "the bare endpoint's")
    heads = f"{'req/s':>8s} {'x bare':>7s} {'p50 ms':>7s} {'p99 ms':>7s} {'CPU us':>7s} {'+ bare':>6s}"
    print(f"   {'server':28s} {heads}  answer / peak RSS per worker")
    big = maximal_body()
    maximal_rows: list[str] = []
    servers: dict[str, Server] = {}
    try:
        # The goal's ratio: the bare endpoint and telemetry on the one-line log measured in turn, round after round,
        # so that a drift of the machine's speed during the run weighs on both alike.
        for name, app, env in setups[:2]:
            servers[name] = start(app, {**quiet, **env}, work / f"{len(servers)}.log", args.workers, args.threads)
        bare, kernel = (servers[name] for name, _, _ in setups[:2])
        runs: dict[str, list[dict[str, float]]] = {"bare": [], "same": [], "vary": []}
        for _ in range(args.rounds):
            runs["bare"].append(wrk(bare, body, args.seconds, work))
            runs["same"].append(wrk(kernel, body, args.seconds, work))
            runs["vary"].append(wrk(kernel, body, args.seconds, work, vary=True))
        median = {key: sorted(got, key=lambda f: f["rps"])[len(got) // 2] for key, got in runs.items()}
        bare_rps = median["bare"]["rps"]
        others = {
            key: ", ".join(f"{f['rps']:.0f} req/s {f['cpu_us']:.0f} us" for f in got if f is not median[key])
            for key, got in runs.items()
        }
        ratio = median["same"]["rps"] / bare_rps
        goal = f"  goal >= {GOAL_THROUGHPUT}x: {'meets' if ratio >= GOAL_THROUGHPUT else 'misses'}"
        varied_body = with_failure_time(body, 1)
        rows = [
            ("bare Flask endpoint", "bare", "fixed answer", bare, ""),
            ("telemetry, one-line log", "same", answer_kind(kernel.port, body), kernel, goal),
            # The same server, no request repeated: every answer comes from a scan (answers.py keeps none).
            ("  the same, a new window each", "vary", answer_kind(kernel.port, varied_body), kernel, ""),
        ]
        for name, key, kind, server, note in rows:
            print_row(name, median[key], median["bare"], f"{kind} / {rss(server)}{note} [{others[key] or '-'}]")
        maximal_rows.append(f"   {setups[1][0]:28s} {maximal(kernel.port, big, args.max_requests)}; "
                            f"peak RSS per worker after it {rss(kernel)}")  # fmt: skip
    finally:
        for server in servers.values():
            server.stop()
    for name, app, env in setups[2:]:
        stub = None
        try:
            if name.startswith("fact"):
                stub = start("bench.fact_stub:app", {}, work / "fact-stub.log", args.workers, args.threads)
                env = {**env, "ATTRIBUTION_FACT_ENDPOINT": stub.url, "PYTHONPATH": f"{FACT_CLIENT}:{ROOT}"}
            server = start(app, {**quiet, **env}, work / f"{name.split(',')[0]}.log", args.workers, args.threads)
        except SystemExit as exc:
            print(f"   {name:28s} not started: {exc}")
            if stub is not None:
                stub.stop()
            continue
        try:
            kind = answer_kind(server.port, body)
            print_row(name, wrk(server, body, args.seconds, work), median["bare"], f"{kind} / {rss(server)}")
            if name == "instant fake provider":
                maximal_rows.append(f"   {name:28s} {maximal(server.port, big, args.max_requests)}; "
                                    f"peak RSS per worker after it {rss(server)}")  # fmt: skip
        finally:
            server.stop()
            if stub is not None:
                stub.stop()
    print(f"\n2. maximal request over HTTP ({MAX_NODES:,} nodes, {MAX_RANKS:,} ranks, {len(big):,} B), one at a time")
    print("\n".join(maximal_rows) or "   (not measured)")
    if not args.skip_providers:
        print("\n3. provider benchmarks")
        run_script(["bench/kernel_scan.py", "--quick"])
        if (ROOT / "bench" / "loki_scope.py").exists():
            run_script(["bench/loki_scope.py"])
        else:
            print("\n(bench/loki_scope.py is not present: skipped)")


if __name__ == "__main__":
    main()

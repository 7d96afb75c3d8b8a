"""Benchmark: the kernel scan at fleet scale, each request with its own failure time, against `tail | grep`.

A tree of N hosts (`<tmp>/worker-NNN/kern.log.1` for 00-12h, `kern.log` from 12h to the moment the logs were
copied, 18:10) holding a day of kernel logs each, of --kib-per-host bytes (bench/kernel_scan.py's generator
writes 64 distinct hosts, each later host is a copy of one of them under its own name; the GPU events of the
generator -- an Xid 79, an Xid 13, a PCIe AER error around 18:00 -- are on hosts 7, 19 and 33 only). The scopes of
the requests are the first 64, 1,024 and 4,096 hosts of the tree (as many as it has).

For each scope a new Python process (the worker) builds the provider as the service does (the `files` source over
the tree, default settings, answers kept) and sends it --requests fast requests, each with its own failure time
(18:00:00 plus 3.7 s times the request's number: no kept answer serves any), timing `provider.fast()` in the
process; right after each request, in the same run, `tail -q -c <share> <every current file of the scope> | grep -c
NVRM` is timed, where the share is the bytes a host's `kern.log` holds from the start of the request's reading
window (its failure time less the lookback and the 60 s of order slack) to its end: the bytes the provider's
window reads, read by the C tools. Printed for each scope: the first request (a worker that read nothing before),
the median of the others, the median `tail | grep`, their ratio, the answer's findings, and the worker's peak RSS
(before the first request and at the end). The worker calls `provider.after_fork()` first, as a server's worker
does: with `ATTRIBUTION_KERNEL_LOG_SCAN_PROCESS` 1 (--scan-process 1, the default) its kernel-log scan process scans
half of each scope of 32 hosts or more; --scan-process 0,1 runs each scope both ways, one after the other.

    python bench/fleet.py [--hosts 64,1024,4096] [--kib-per-host 2048] [--requests 9] [--tree DIR] [--scan-process 0,1]

With --tree DIR the tree is written there once and kept (a later run with the same DIR and sizes reuses it);
without it, a temporary tree is written and removed afterwards. A 4,096-host tree of 2 MiB days takes about
6 GiB.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.kernel_scan import DAY, generate  # noqa: E402 - after the path tweak that lets the script run from anywhere

KIB = 1024
MIB = 1024 * 1024
TEMPLATES = 64
#: the hosts of the generator that carry GPU events: copies of them get a quiet host's lines instead
CULPRITS = (7, 19, 33)
#: the logs end here (the moment they were copied): a few minutes after the latest failure time
END = DAY + timedelta(hours=18, minutes=10)
FIRST_FAILURE = DAY + timedelta(hours=18)
STEP = timedelta(seconds=3.7)
#: the provider's defaults (providers/telemetry/settings.py) and its order slack (kernel/sources/search.py)
LOOKBACK = timedelta(seconds=900)
SLACK = timedelta(seconds=60)


def host(n: int) -> str:
    return f"worker-{n:03d}"


def write_tree(root: Path, hosts: int, kib_per_host: int, seed: int = 1, quiet: bool = False) -> None:
    """The tree of `hosts` hosts (see the module's doc); a tree already there with a stamp of the same sizes is
    kept. `quiet`: the generator writes no GPU event on any host (bench/fleet_jobs.py, where the job logs decide)."""
    stamp = root / ".fleet"
    wanted = json.dumps({"hosts": hosts, "kib": kib_per_host, "seed": seed, **({"quiet": True} if quiet else {})})
    if stamp.exists() and stamp.read_text() == wanted:
        return
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fleet-templates-") as tmp:
        generate(Path(tmp), TEMPLATES, TEMPLATES * kib_per_host * KIB, seed, quiet=quiet)
        templates = []
        for n in range(TEMPLATES):
            folder = Path(tmp) / host(n)
            old = (folder / "kern.log.1").read_bytes()
            new = (folder / "kern.log").read_bytes()
            templates.append((old, new[: _end_offset(new)]))
    cut = END.timestamp()
    for n in range(hosts):
        k = n % TEMPLATES
        if n >= TEMPLATES and k in CULPRITS:
            k = 0
        name = host(n).encode()
        folder = root / host(n)
        folder.mkdir()
        for file, data, mtime in (("kern.log.1", templates[k][0], (DAY + timedelta(hours=12)).timestamp()),
                                  ("kern.log", templates[k][1], cut)):  # fmt: skip
            path = folder / file
            path.write_bytes(data.replace(host(k).encode(), name))
            os.utime(path, (mtime, mtime))
        os.utime(folder, (cut, cut))
    os.utime(root, (cut, cut))
    os.sync()
    stamp.write_text(wanted)
    size = sum(p.stat().st_size for p in root.glob("*/kern.log*"))
    print(f"tree: {hosts} hosts, {size / MIB:.0f} MiB, written in {time.perf_counter() - t0:.0f} s", flush=True)


def _first_at(data: bytes, at: datetime) -> int:
    """The start of the first line of `data` (a generated `kern.log`, lines in time order) stamped at or after `at`
    (the end of `data` when there is none)."""
    key = at.strftime("%Y-%m-%dT%H:%M:%S").encode()
    lo, hi = 0, len(data)
    while lo < hi:
        mid = (lo + hi) // 2
        start = data.rfind(b"\n", 0, mid) + 1
        if data[start : start + len(key)] < key:
            lo = data.find(b"\n", mid) + 1 or len(data)
        else:
            hi = start
    return lo


def _end_offset(data: bytes) -> int:
    """The end of the last line of `data` stamped before END."""
    return _first_at(data, END)


def _window_share(path: Path, at: datetime) -> int:
    """The bytes of `path` from the first line stamped at or after `at` to its end."""
    data = path.read_bytes()
    return len(data) - _first_at(data, at)


def _peak_mib(pid: int | None = None) -> float:
    """The worker's peak RSS (or process `pid`'s): its memory's high-water mark (`VmHWM`), which starts at its own
    exec (`ru_maxrss` may hold the parent's from before the exec)."""
    try:
        for line in Path(f"/proc/{pid or 'self'}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(root: Path, scope: int, shares: list[int], profile: Path | None = None, scan_process: int = 1) -> None:
    """One worker: the provider's requests and, after each, `tail | grep` over the same bytes; prints one JSON line
    (with `profile`, the provider's requests are profiled into that file)."""
    from providers.base import AttributionRequest, Deadline, FailureContext, Phase, Scope, WorkloadContext
    from providers.telemetry import TelemetryProvider

    names = tuple(host(n) for n in range(scope))
    files = [str(root / name / "kern.log") for name in names]
    requests = len(shares)
    times = [FIRST_FAILURE + k * STEP for k in range(requests)]
    provider = TelemetryProvider.from_options({
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(root),
        "ATTRIBUTION_KERNEL_LOG_SCAN_PROCESS": str(scan_process),
    })
    provider.after_fork()  # as a server's worker: its scan process (if set) scans half of a scope of 32 hosts or more
    before = _peak_mib()
    profiler = cProfile.Profile() if profile is not None else None
    provider_s: list[float] = []
    grep_s: list[float] = []
    outcome = None
    for at, share in zip(times, shares, strict=True):
        request = AttributionRequest(
            workload_id="fleet",
            scope=Scope(nodes=names, ranks=()),
            failure_context=FailureContext(detected_at=at, detection_signal="application_error"),
            timeout_ms=600000,
            workload_context=WorkloadContext(workflow_id="fleet", attempt_index=0),
            phase=Phase.FAST,
        )
        t0 = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        outcome = provider.fast(request, Deadline.after_ms(600000), None)
        if profiler is not None:
            profiler.disable()
        provider_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        tail = subprocess.Popen(["tail", "-q", "-c", str(share), *files], stdout=subprocess.PIPE)
        grep = subprocess.run(["grep", "-c", "NVRM"], stdin=tail.stdout, capture_output=True, check=False)
        tail.stdout.close()  # type: ignore[union-attr]
        tail.wait()
        grep_s.append(time.perf_counter() - t0)
        nvrm = int(grep.stdout or 0)
    assert outcome is not None
    provider.close()
    if profiler is not None:
        profiler.dump_stats(profile)  # type: ignore[arg-type]
    findings = sorted((getattr(f.target, "name", "job"), f.error_category) for f in outcome.attributions)
    print(json.dumps({
        "scope": scope, "first_s": provider_s[0], "provider_s": statistics.median(provider_s[1:] or provider_s),
        "grep_s": statistics.median(grep_s), "share_kib": statistics.mean(shares) / KIB, "nvrm_lines": nvrm,
        "findings": findings, "error": None if outcome.error is None else outcome.error.type.value,
        "rss_before_mib": before, "rss_peak_mib": _peak_mib(), "requests": requests,
    }))  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", default="64,1024,4096", help="the scopes, comma-separated; the tree has the largest")
    parser.add_argument("--kib-per-host", type=int, default=2048, help="a host's day of kernel logs")
    parser.add_argument("--requests", type=int, default=9, help="requests per scope (the median of all but the first)")
    parser.add_argument("--tree", type=Path, help="write the tree here and keep it (reused by a later run)")
    parser.add_argument("--profile", type=Path, help="profile the largest scope's requests into this file (cProfile)")
    parser.add_argument("--scan-process", default="1", help="ATTRIBUTION_KERNEL_LOG_SCAN_PROCESS: 1 (the default), 0, "
                        "or 0,1 for both, one after the other for each scope")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)  # the scope of one worker process
    parser.add_argument("--shares", help=argparse.SUPPRESS)  # the worker's shares, comma-separated
    args = parser.parse_args(argv)
    if args.worker is not None:
        worker(args.tree, args.worker, [int(s) for s in args.shares.split(",")], args.profile, int(args.scan_process))
        return
    scopes = [int(s) for s in args.hosts.split(",")]
    root = args.tree or Path(tempfile.mkdtemp(prefix="fleet-"))
    try:
        write_tree(root, max(scopes), args.kib_per_host)
        # the share of each request: the mean over the 64 distinct hosts (every other host is a copy of one of them)
        times = [FIRST_FAILURE + k * STEP for k in range(args.requests)]
        shares = [
            round(statistics.mean(_window_share(root / host(n) / "kern.log", at - LOOKBACK - SLACK)
                                  for n in range(min(TEMPLATES, max(scopes)))))
            for at in times
        ]  # fmt: skip
        for scope, mode in ((scope, mode) for scope in scopes for mode in args.scan_process.split(",")):
            profile = ["--profile", str(args.profile)] if args.profile and scope == max(scopes) else []
            out = subprocess.run(
                [sys.executable, __file__, "--worker", str(scope), "--tree", str(root),
                 "--shares", ",".join(map(str, shares)), "--scan-process", mode, *profile],
                capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
            r = json.loads(out.strip().splitlines()[-1])
            label = f"{scope} hosts, scan process {mode}"
            print(f"[{label}] provider fast: first request {r['first_s'] * 1000:.0f} ms, then "
                  f"{r['provider_s'] * 1000:.0f} ms (median of {r['requests'] - 1}, each its own failure time); "
                  f"tail -c {r['share_kib']:.0f}KiB | grep -c NVRM over the same files: {r['grep_s'] * 1000:.0f} ms; "
                  f"ratio {r['provider_s'] / r['grep_s']:.2f}x; per host {r['provider_s'] / scope * 1e6:.0f} us; "
                  f"worker RSS {r['rss_before_mib']:.0f} MiB before the first request, peak {r['rss_peak_mib']:.0f} "
                  f"MiB", flush=True)  # fmt: skip
            print(f"[{label}] answer: {r['findings']}, error {r['error']}; {r['nvrm_lines']} NVRM lines in "
                  f"the tail", flush=True)  # fmt: skip
    finally:
        if args.tree is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

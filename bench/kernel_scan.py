"""Benchmark: one telemetry `fast` request (`files` source) over a generated day of logs versus `grep -rc NVRM`.

The tree (`<tmp>/<host>/kern.log.1` for 00-12h, `<host>/kern.log` for 12-24h, RSYSLOG_FileFormat; in the combined
variant every host's lines in time order in `<tmp>/kern.log.1` and `<tmp>/kern.log`, a sixth of the size, the request
naming 8 of the hosts) holds realistic
kernel noise -- network, storage, audit, firmware-tracer lines, now and then a several-line record (a hung-task
report repeating its kernel stamp) and a rare driver banner (`NVRM: loading NVIDIA UNIX ...`) -- plus a few GPU events
around the request's failure time: an Xid 79 on one host, an Xid 13 on another, a corrected PCIe AER error on a
third. The quiet variant has no GPU event at all. Files get their last line's time as modification time, as a
finished day of logs has. The tree is removed afterwards.

Figures (each on one line): the request's wall time with a cold provider cache (a new provider per run; the OS page
cache is warm, as it is for grep), with a warm one (the same provider again), with the warm provider asked about
a later failure each time (every window new, overlapping earlier ones) and with every current file appended to
just before each request (live logs), as the median of N runs (N = --repeat for the cold requests, 4N + 3 for the
warm, new-window and live ones, which take a few ms each, where the machine's noise weighs most); these
providers keep no answers, so each of those requests scans. Then the same request again on a provider that keeps
answers (providers/telemetry/answers.py, as the service's provider does), once the files have settled: it is
answered by looking up the identity of every folder and file the first scan read (median of 4N + 3);
`grep -rc NVRM` over the same tree run as a subprocess in the same run (median of 4N + 3, each run right after a
warm request, so that both meet the machine in the same state); their ratio; the bytes
the request read (from /proc/self/io: rchar, and read_bytes from storage); the process's peak RSS. The tree is
written out (`os.sync`) before anything is measured.

The providers are started as a server's worker starts them (`after_fork`): with `ATTRIBUTION_KERNEL_LOG_SCAN_PROCESS`
1 (--scan-process 1, the default) a provider's kernel-log scan process scans half of a scope of 32 hosts or more (not
the combined file's: each half would read it); --scan-process 0,1 runs every measurement both ways, in turn.

    python bench/kernel_scan.py [--nodes 64] [--total-mib 288] [--repeat 7] [--quick] [--scan-process 0,1]
    python -m bench.kernel_scan --quick
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from providers.base import (  # noqa: E402 - after the path tweak that lets the script run from anywhere
    AttributionOutcome,
    AttributionRequest,
    Deadline,
    FailureContext,
    Phase,
    Scope,
    WorkloadContext,
)
from providers.telemetry import TelemetryProvider  # noqa: E402
from providers.telemetry.provider import parse_settings  # noqa: E402

DAY = datetime(2026, 9, 9, tzinfo=UTC)
DETECTED = DAY + timedelta(hours=18)
MIB = 1024 * 1024
NOISE = (
    "IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready",
    "mlx5_core 0000:0c:00.0: mlx5_fw_tracer_handle_traces:751:(pid 1824): FW tracer rotated log buffer",
    "EXT4-fs (nvme0n1p2): re-mounted. Opts: errors=remount-ro. Quota mode: none.",
    'audit: type=1400 audit(1788954002.116:412): apparmor="STATUS" operation="profile_replace" name="nvidia_modprobe"',
    "nfs: server storage-07 not responding, still trying",
    "nfs: server storage-07 OK",
    "perf: interrupt took too long (2502 > 2500), lowering kernel.perf_event_max_sample_rate to 79800",
    "TCP: request_sock_TCP: Possible SYN flooding on port 8080. Sending cookies.  Check SNMP counters.",
)
HUNG_TASK = (
    "INFO: task kworker/u256:3:81234 blocked for more than 122 seconds.",
    '"echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.',
    "task:kworker/u256:3 state:D stack:0 pid:81234 ppid:2 flags:0x00004000",
)
BANNER = "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024"
#: (host index, seconds before the failure, message): the events of the busy variant
EVENTS = (
    (7, 120.0, "NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."),
    (
        19,
        300.0,
        "NVRM: Xid (PCI:0000:38:00): 13, pid=2291, name=python3, Graphics SM Warp Exception on (GPC 9, "
        "TPC 1, SM 1): Out Of Range Address",
    ),  # fmt: skip
    (
        33,
        500.0,
        "pcieport 0000:00:01.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)",
    ),  # fmt: skip
)


def _stamp(seconds: float) -> str:
    whole = int(seconds)
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    return f"2026-09-09T{h:02d}:{m:02d}:{s:02d}.{int((seconds - whole) * 1e6):06d}+00:00"


def generate(root: Path, nodes: int, total_bytes: int, seed: int, quiet: bool, combined: bool = False) -> int:
    """Write the tree (`combined`: every host's lines, in time order, in `<tmp>/kern.log.1` and `kern.log`, as a
    central syslog server writes one file for all); return the bytes written."""
    rng = random.Random(seed)
    per_node = total_bytes // nodes
    average = 144  # bytes of a line, roughly (the hung-task records and systemd lines included)
    lines = max(2, per_node // average)
    step = 86400 / lines
    written = 0
    events = {} if quiet else {host: (18 * 3600 - before, msg) for host, before, msg in EVENTS}
    merged: dict[str, list[tuple[float, str]]] = {"kern.log.1": [], "kern.log": []}
    for n in range(nodes):
        host = f"worker-{n:03d}"
        folder = root / host
        halves: dict[str, list[str]] = {"kern.log.1": [], "kern.log": []}
        event = events.get(n)
        t = 0.0
        for i in range(lines):
            t = i * step + rng.random() * step * 0.5
            half = halves["kern.log.1" if t < 43200 else "kern.log"]
            if event is not None and event[0] <= t:
                half.append(f"{_stamp(event[0])} {host} kernel: [{600000 + event[0]:.6f}] {event[1]}")
                event = None
            prefix = f"{_stamp(t)} {host} kernel: [{600000 + t:.6f}] "
            roll = rng.random()
            if roll < 0.0005:
                half.extend(prefix + part for part in HUNG_TASK)  # one record, its kernel stamp repeated
            elif roll < 0.0006:
                half.append(prefix + BANNER)
            elif roll < 0.02:
                half.append(f"{_stamp(t)} {host} systemd[1]: Started session-{i}.scope - Session {i} of user slurm.")
            else:
                half.append(prefix + NOISE[rng.randrange(len(NOISE))])
        if combined:
            for name, chunk in halves.items():
                # a host's lines keep their order; across hosts, the time of each line's stamp
                merged[name].extend((_seconds(line), line) for line in chunk)
            continue
        folder.mkdir(parents=True)
        for name, chunk in halves.items():
            data = ("\n".join(chunk) + "\n").encode()
            path = folder / name
            path.write_bytes(data)
            written += len(data)
            last = (DAY + timedelta(seconds=t if name == "kern.log" else 43200)).timestamp()
            os.utime(path, (last, last))
        os.utime(folder, (DAY.timestamp() + 86400, DAY.timestamp() + 86400))
    for name, timed in merged.items() if combined else ():
        timed.sort(key=lambda item: item[0])
        data = ("\n".join(line for _, line in timed) + "\n").encode()
        (root / name).write_bytes(data)
        written += len(data)
        last = (DAY + timedelta(seconds=timed[-1][0])).timestamp()
        os.utime(root / name, (last, last))
    os.utime(root, (DAY.timestamp() + 86400, DAY.timestamp() + 86400))
    return written


def _append_everywhere(root: Path, line: str) -> None:
    """Append `line` to every current file (`kern.log`) of the tree, as a logging daemon does."""
    for path in [*root.glob("*/kern.log"), *root.glob("kern.log")]:
        with path.open("a") as log:
            log.write(line)


def _seconds(line: str) -> float:
    """The seconds into the day of a generated line's stamp."""
    h, m, s = line[11:13], line[14:16], line[17:26]
    return int(h) * 3600 + int(m) * 60 + float(s)


def _io() -> tuple[int, int]:
    """(rchar, read_bytes) of this process so far; zeros where /proc/self/io is missing."""
    try:
        fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    except OSError:
        return 0, 0
    return int(fields["rchar"]), int(fields["read_bytes"])


def _provider(root: Path, keep_answers: bool = False, scan_process: bool = False) -> TelemetryProvider:
    """The provider over `root`; without `keep_answers` every request scans (the figures are the scan's); with
    `scan_process`, started as a server's worker starts it (`after_fork`: its kernel-log scan process scans half of a
    scope of 32 hosts or more); close it after use."""
    options = {
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
        "ATTRIBUTION_KERNEL_LOG_DIR": str(root),
        # a 15-minute window: 13 minutes before the failure, 2 after
        "ATTRIBUTION_KERNEL_LOG_LOOKBACK_SECONDS": "780",
        "ATTRIBUTION_KERNEL_LOG_GRACE_SECONDS": "120",
    }
    provider = TelemetryProvider(parse_settings(options), keep_answers=keep_answers)
    if scan_process:
        provider.after_fork()
    return provider


def _request(nodes: tuple[str, ...], detected_at: datetime = DETECTED) -> AttributionRequest:
    return AttributionRequest(
        workload_id="bench",
        scope=Scope(nodes=nodes, ranks=()),
        failure_context=FailureContext(detected_at=detected_at, detection_signal="application_error"),
        timeout_ms=300000,
        workload_context=WorkloadContext(workflow_id="bench", attempt_index=0),
        phase=Phase.FAST,
    )


def _timed(call: Callable[[], AttributionOutcome]) -> tuple[float, int, int, AttributionOutcome]:
    rchar, read_bytes = _io()
    t0 = time.perf_counter()
    outcome = call()
    elapsed = time.perf_counter() - t0
    rchar2, read_bytes2 = _io()
    return elapsed, rchar2 - rchar, read_bytes2 - read_bytes, outcome


def run(
    label: str, nodes: int, total_mib: int, repeat: int, seed: int, quiet: bool, combined: bool = False, scope: int = 0,
    scan_process: bool = False,
) -> None:
    root = Path(tempfile.mkdtemp(prefix="kernel-log-bench-"))
    try:
        t0 = time.perf_counter()
        total = generate(root, nodes, total_mib * MIB, seed, quiet, combined)
        os.sync()  # the tree's pages written out now, not by the kernel while the figures are taken
        layout = "one combined file" if combined else "a folder per host"
        names = tuple(f"worker-{n:03d}" for n in range(scope or nodes))
        print(f"[{label}] tree: {nodes} hosts ({layout}), {total / MIB:.1f} MiB, generated in "
              f"{time.perf_counter() - t0:.1f} s; the request's scope: {len(names)} hosts")  # fmt: skip
        request = _request(names)

        cold = []
        for _ in range(repeat):
            provider = _provider(root, scan_process=scan_process)
            cold.append(_timed(lambda p=provider: p.fast(request, Deadline.after_ms(300000), None)))  # type: ignore[misc]
            provider.close()
        provider = _provider(root, scan_process=scan_process)
        provider.fast(request, Deadline.after_ms(300000), None)
        # The quick measurements (a few ms each, where the machine's noise weighs most) are taken more often, and the
        # warm request and grep in turn: a slower spell of a shared machine weighs on both alike.
        many = 4 * repeat + 3
        warm = []
        grep_times = []
        nvrm = 0
        for _ in range(many):
            warm.append(_timed(lambda: provider.fast(request, Deadline.after_ms(300000), None)))
            t0 = time.perf_counter()
            done = subprocess.run(["grep", "-rc", "NVRM", str(root)], capture_output=True, text=True, check=False)
            grep_times.append(time.perf_counter() - t0)
            nvrm = sum(int(line.rsplit(":", 1)[1]) for line in done.stdout.splitlines() if line)
        # The same warm provider asked about other failures: each window new (moved by 3 minutes more each time),
        # overlapping what earlier requests read.
        moved = []
        for k in range(1, many + 1):
            other = _request(names, DETECTED + timedelta(minutes=3 * k))
            moved.append(_timed(lambda r=other: provider.fast(r, Deadline.after_ms(300000), None)))  # type: ignore[misc]
        # Live logs: a line appended to every current file before each request (modified just now, as a live
        # kern.log is), the first window again.
        live = []
        for k in range(many):
            _append_everywhere(root, f"{_stamp(86399 - many + k)} worker kernel: [1.000000] clocksource: tick\n")
            live.append(_timed(lambda: provider.fast(request, Deadline.after_ms(300000), None)))

        # The same request again with answers kept (providers/telemetry/answers.py), as a served worker keeps them:
        # once the files have settled, it is answered by looking up the identity of each folder and file read.
        provider.close()
        keeping = _provider(root, keep_answers=True, scan_process=scan_process)
        while time.time() - max(p.stat().st_ctime for p in root.rglob("*")) < 2.5:
            time.sleep(0.5)
        keeping.fast(request, Deadline.after_ms(300000), None)
        kept = [_timed(lambda: keeping.fast(request, Deadline.after_ms(300000), None)) for _ in range(many)]
        keeping.close()

        outcome = warm[-1][3]
        findings = sorted((getattr(f.target, "name", "job"), f.error_category) for f in outcome.attributions)
        cold_s = statistics.median(r[0] for r in cold)
        warm_s = statistics.median(r[0] for r in warm)
        grep_s = statistics.median(grep_times)
        error = outcome.error.type.value if outcome.error else None
        print(f"[{label}] answer: {len(findings)} finding(s) {findings}, "
              f"{len(outcome.unattributed_targets)} unattributed, error {error}")  # fmt: skip
        print(f"[{label}] provider fast request, cold cache: {cold_s * 1000:.1f} ms (median of {repeat})")
        print(f"[{label}] provider fast request, warm cache: {warm_s * 1000:.1f} ms (median of {many})")
        moved_s = statistics.median(r[0] for r in moved)
        live_s = statistics.median(r[0] for r in live)
        live_read = statistics.median(r[1] for r in live) / MIB
        print(f"[{label}] provider fast request, warm cache, every current file appended to just before: "
              f"{live_s * 1000:.1f} ms (median of {many}; {live_read:.2f} MiB read)")
        print(f"[{label}] provider fast request, warm cache, a different window each time: {moved_s * 1000:.1f} ms "
              f"(median of {many}; {statistics.median(r[1] for r in moved) / MIB:.2f} MiB read)")  # fmt: skip
        kept_s = statistics.median(r[0] for r in kept)
        same = "the same answer" if kept[-1][3] == outcome else "ANOTHER ANSWER"
        print(f"[{label}] provider fast request, the same request again with answers kept: {kept_s * 1000:.2f} ms "
              f"(median of {many}; {statistics.median(r[1] for r in kept) / MIB:.2f} MiB read; {same})")  # fmt: skip
        print(f"[{label}] grep -rc NVRM over the tree: {grep_s * 1000:.1f} ms (median of {many}), {nvrm} lines")
        print(f"[{label}] ratio provider/grep: cold {cold_s / grep_s:.3f}x, warm {warm_s / grep_s:.3f}x, "
              f"warm with a different window {moved_s / grep_s:.3f}x, warm with live files {live_s / grep_s:.3f}x, "
              f"the same request with answers kept {kept_s / grep_s:.4f}x")
        print(f"[{label}] bytes read per request: cold {statistics.median(r[1] for r in cold) / MIB:.2f} MiB, "
              f"warm {statistics.median(r[1] for r in warm) / MIB:.2f} MiB (rchar; tree {total / MIB:.1f} MiB), "
              f"from storage {max(r[2] for r in cold + warm) / MIB:.2f} MiB (read_bytes)")  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=64, help="hosts in the tree and in the request's scope")
    parser.add_argument("--total-mib", type=int, default=288, help="total size of the generated day of logs")
    parser.add_argument("--repeat", type=int, default=7, help="runs of each measurement (the median is printed)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="a small tree and 3 runs (16 hosts, 32 MiB)")
    parser.add_argument("--scan-process", default="1", help="providers started as a server's worker with "
                        "ATTRIBUTION_KERNEL_LOG_SCAN_PROCESS 1 (the default), 0, or 0,1 for both in turn")
    args = parser.parse_args(argv)
    if args.quick:
        args.nodes, args.total_mib, args.repeat = 16, 32, 3
    for mode in (int(m) for m in args.scan_process.split(",")):
        with_it = {"scan_process": mode == 1}
        suffix = f", scan process {mode}"
        run("busy" + suffix, args.nodes, args.total_mib, args.repeat, args.seed, quiet=False, **with_it)
        run("quiet" + suffix, args.nodes, args.total_mib, args.repeat, args.seed, quiet=True, **with_it)
        # A central server's one file for all hosts, a sixth of the size, asked about 8 of the hosts.
        run("combined" + suffix, args.nodes, args.total_mib // 6, args.repeat, args.seed, quiet=False, combined=True,
            scope=8, **with_it)  # fmt: skip
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"peak RSS of the benchmark process: {peak / 1024:.1f} MiB")


if __name__ == "__main__":
    main()

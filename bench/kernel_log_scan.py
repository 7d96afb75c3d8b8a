"""Benchmark: the kernel_log `files` source on a generated day of logs versus `grep -c NVRM` over the same files."""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from providers.base import (  # noqa: E402 - after the path tweak that lets the script run from anywhere
    AttributionRequest,
    Deadline,
    FailureContext,
    Phase,
    Scope,
    WorkloadContext,
)
from providers.kernel_log import KernelLogProvider  # noqa: E402
from providers.kernel_log.provider import attribute, fast_window  # noqa: E402

DAY = datetime(2026, 9, 9, tzinfo=UTC)
DETECTED = DAY + timedelta(hours=18)
MESSAGES = (
    "IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready",
    "mlx5_core 0000:0c:00.0: mlx5_fw_tracer_handle_traces:751:(pid 1824): FW tracer rotated log buffer",
    "EXT4-fs (nvme0n1p2): re-mounted. Opts: errors=remount-ro. Quota mode: none.",
    'audit: type=1400 audit(1788954002.116:412): apparmor="STATUS" operation="profile_replace" name="nvidia_modprobe"',
    "NVRM: GPU at PCI:0000:91:00: GPU-6a3c5e4b-1f2d-4c7e-9a8b-2d1e0f3c4b5a",
)


def _stamp(seconds: float) -> str:
    whole = int(seconds)
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    return f"2026-09-09T{h:02d}:{m:02d}:{s:02d}.{int((seconds - whole) * 1e6):06d}+00:00"


def generate(root: Path, nodes: int, total_bytes: int, seed: int) -> int:
    """Write `<root>/<host>/kern.log.1` (00-12h) and `kern.log` (12-24h) per host; return the bytes written."""
    rng = random.Random(seed)
    per_node = total_bytes // nodes
    sample = sum(len(f"{_stamp(0)} worker-000 kernel: [680111.646286] {m}\n") for m in MESSAGES) // len(MESSAGES)
    lines = max(2, per_node // sample)
    step = 86400 / lines
    written = 0
    for n in range(nodes):
        host = f"worker-{n:03d}"
        folder = root / host
        folder.mkdir(parents=True)
        halves = {"kern.log.1": [], "kern.log": []}
        for i in range(lines):
            t = i * step + rng.random() * step * 0.5
            name = "kern.log.1" if t < 43200 else "kern.log"
            msg = MESSAGES[i % len(MESSAGES)]
            halves[name].append(f"{_stamp(t)} {host} kernel: [{600000 + t:.6f}] {msg}\n")
        if n == 7:  # one node loses a GPU two minutes before the failure
            t = 18 * 3600 - 120.0
            halves["kern.log"].append(
                f"{_stamp(t)} {host} kernel: [{600000 + t:.6f}] NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', "
                "name=<unknown>, GPU has fallen off the bus.\n"
            )
            halves["kern.log"].sort()
        for name, chunk in halves.items():
            data = "".join(chunk).encode()
            (folder / name).write_bytes(data)
            written += len(data)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=256, help="hosts in the tree and in the request's scope")
    parser.add_argument("--total-mib", type=int, default=1024, help="total size of the generated day of logs")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the generated tree (its path is printed)")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="kernel-log-bench-"))
    try:
        t0 = time.perf_counter()
        total = generate(root, args.nodes, args.total_mib * 1024 * 1024, args.seed)
        print(f"generated {args.nodes} hosts, {total / 2**20:.1f} MiB in {time.perf_counter() - t0:.1f} s at {root}")

        provider = KernelLogProvider.from_options(
            {
                "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
                "ATTRIBUTION_KERNEL_LOG_DIR": str(root),
                # a 15-minute window: 13 minutes before the failure, 2 after
                "ATTRIBUTION_KERNEL_LOG_LOOKBACK_SECONDS": "780",
                "ATTRIBUTION_KERNEL_LOG_GRACE_SECONDS": "120",
            }
        )
        nodes = tuple(f"worker-{n:03d}" for n in range(args.nodes))
        request = AttributionRequest(
            workload_id="bench",
            scope=Scope(nodes=nodes, ranks=()),
            failure_context=FailureContext(detected_at=DETECTED, detection_signal="application_error"),
            timeout_ms=300000,
            workload_context=WorkloadContext(workflow_id="bench", attempt_index=0),
            phase=Phase.FAST,
        )
        window = fast_window(request, timedelta(seconds=780), timedelta(seconds=120))
        assert window is not None
        t0 = time.perf_counter()
        # What `fast` does, split so the bytes read can be shown.
        collector = provider.collect(list(nodes), window, Deadline.after_ms(300000), None)
        outcome = attribute(list(nodes), collector, provider.settings.max_evidence, "syslog")
        provider_s = time.perf_counter() - t0
        findings = [(getattr(f.target, "name", "job"), f.error_category) for f in outcome.attributions]

        t0 = time.perf_counter()
        grep = subprocess.run(["grep", "-rc", "NVRM", str(root)], capture_output=True, text=True, check=False)
        grep_s = time.perf_counter() - t0
        nvrm = sum(int(line.rsplit(":", 1)[1]) for line in grep.stdout.splitlines() if line)

        print(f"window: {window.start:%H:%M:%S}..{window.end:%H:%M:%S} UTC, {len(nodes)} nodes")
        print(f"provider: {provider_s:.3f} s, {collector.bytes_read / 2**20:.2f} MiB read, findings {findings}")
        print(f"grep -rc NVRM: {grep_s:.3f} s, {total / 2**20:.2f} MiB read, {nvrm} NVRM lines")
        print(
            f"ratio grep/provider: time {grep_s / provider_s:.1f}x, bytes {total / max(1, collector.bytes_read):.1f}x"
        )
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

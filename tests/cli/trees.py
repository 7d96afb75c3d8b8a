"""Log trees for the command line's tests: the samples, and a broken tree with one of each thing `check` reports."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "conf" / "samples"

GOOD_LINE = (
    "2026-09-09T11:58:12.123481+00:00 worker-01 kernel: [679160.239013] NVRM: Xid (PCI:0000:91:00): 79, "
    "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
)
# Plain `dmesg` (seconds since boot) as util-linux prints it without --time-format.
PLAIN_DMESG = "[  903.609564] NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', GPU has fallen off the bus.\n"
# A glog-style application line: no format the provider reads.
UNKNOWN = "I0909 11:58:12.123481 4242 main.cc:12] all good\n"
DMESG_ISO = "2026-09-09T11:58:12,123481+00:00 NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.\n"


def samples_env() -> dict[str, str]:
    return {
        "ATTRIBUTION_PROVIDER": "telemetry",
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
        "ATTRIBUTION_KERNEL_LOG_DIR": str(SAMPLES / "kernel-logs"),
        "ATTRIBUTION_EPILOG_DIR": str(SAMPLES / "epilog"),
    }


def broken_tree(base: Path) -> dict[str, str]:
    """A tree that holds one readable host and each kind of trouble; returns its settings."""
    logs, results = base / "kernel-logs", base / "epilog"
    (logs / "worker-01").mkdir(parents=True)
    shutil.copy(SAMPLES / "kernel-logs" / "worker-01" / "kern.log", logs / "worker-01" / "kern.log")
    (logs / "worker-07").mkdir()
    (logs / "worker-07" / "dmesg.log").write_text(PLAIN_DMESG * 3)
    (logs / "worker-08").mkdir()
    (logs / "worker-08" / "kern.log").write_text(GOOD_LINE.replace("worker-01", "worker-08"))
    whole = gzip.compress((GOOD_LINE * 200).encode(), mtime=0)
    (logs / "worker-08" / "kern.log.1.gz").write_bytes(whole[: len(whole) // 2])  # cut in the middle
    (logs / "worker-09.log").write_text(UNKNOWN * 5)
    (logs / "2026-09-09" / "worker-10").mkdir(parents=True)  # date-first layout: one level too deep
    (logs / "2026-09-09" / "worker-10" / "kern.log").write_text(GOOD_LINE.replace("worker-01", "worker-10"))
    (logs / "worker-11").mkdir()
    (logs / "worker-11" / "kern.log").write_text(GOOD_LINE.replace("worker-01", "worker-11"))
    os.mkfifo(logs / "worker-11" / "kern.log.pipe")
    os.symlink("loop", logs / "loop")  # a link to itself
    (logs / "kern.log").write_text(DMESG_ISO * 2)  # a combined file whose lines name no host
    results.mkdir()
    shutil.copy(SAMPLES / "epilog" / "worker-01-20260909T121000Z.json", results / "worker-01-20260909T121000Z.json")
    (results / "worker-07-20260909T121000Z.json").write_text('{"DCGM Diagnostic": {"test_categories": [')
    return {
        "ATTRIBUTION_PROVIDER": "telemetry",
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
        "ATTRIBUTION_KERNEL_LOG_DIR": str(logs),
        "ATTRIBUTION_EPILOG_DIR": str(results),
    }

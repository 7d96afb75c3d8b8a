"""Real logs mutated at random (bytes inserted, removed, replaced by ones that matter to the readers): the provider
answers whatever the bytes say, and never fails on them; the job-log reader's buffer pass still finds what a parse of
every line finds. Seeded, so each run asks the same cases: 400 kernel logs, 100 journal files and 800 job logs, or
with `ATTRIBUTION_FUZZ_EXAMPLES` that many, a quarter and twice as many (`make fuzz-deep`: 2000).
"""

from __future__ import annotations

import os
import random
from datetime import datetime
from pathlib import Path

import pytest

from app import create_app
from app.settings import Settings
from providers.base import Deadline
from providers.telemetry import TelemetryProvider
from tests.joblog.test_prefilter import SHAPES, _both
from tests.telemetry import journal_exports
from tests.telemetry.conftest import fast_body, make_request, rsyslog, write_lines, xid
from tests.telemetry.journals import write_journal
from tests.telemetry.test_foreign_digits import _LINES

FIXTURES = Path(__file__).parent / "fixtures"
EXAMPLES = int(os.environ.get("ATTRIBUTION_FUZZ_EXAMPLES", "0")) or 400
#: bytes that mean something to the kernel-log readers
KERNEL_BYTES = [
    b"\x00", b"\xff", b"[", b"]", b":", b"\n", b" ", b"{", b'"', b"\r", b"\t", b"\xe2\x80", b"=====",
    b"NVRM: Xid (PCI:0000:07:00): ", b"79, ", b"kernel: ", b"SXid (PCI:0000:07:00): ", b"12028, ", b"Fatal, ",
    b"2026-09-09T11:59:00.000000+00:00 ", b"[12345.678901] ", b"pid=", b"0x", b"Link ", b"GPU has fallen off the bus",
]
#: bytes that mean something to the job-log reader
JOB_BYTES = [
    b"\x00", b"\xff", b"[", b"]", b":", b"\n", b" ", b"{", b'"', b"[rank", b"]:", b"7", b"-", b"=" * 60,
    b"Traceback (most recent call last):", b"Failures:", b"Root Cause", b"  ", b"\t", b"\r", b"\x1b[0m", b"[PG ",
    b"Rank ", b"NCCL WARN", b"2026-09-09T11:59:00.000000Z ", b"stderr F ", b"stdout P ", b"\xe2\x80",
]


def _mutated(rng: random.Random, data: bytes, tokens: list[bytes], most: int) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, most)):
        at = rng.randrange(len(out) + 1)
        roll = rng.random()
        if roll < 0.4:
            out[at:at] = rng.choice(tokens)
        elif roll < 0.7:
            del out[at : at + rng.randint(1, 16)]
        else:
            out[at : at + 1] = rng.choice(tokens)
    return bytes(out)


def test_an_xid_line_that_names_no_device_is_read(tmp_path: Path) -> None:
    # `NVRM: Xid (PCI:): 79, ...` (the device left out) made the request fail; it is an Xid 79 of no named device.
    line = rsyslog(datetime.fromisoformat("2026-09-09T11:59:00+00:00"), "gpu-1", xid(79, bus=""))
    assert "Xid (PCI:): 79," in line
    write_lines(tmp_path / "gpu-1.log", [line])
    options = {"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path)}
    client = create_app(Settings(provider="telemetry"), TelemetryProvider.from_options(options)).test_client()
    body = client.post("/v1/attribution", json=fast_body(["gpu-1", "gpu-2"], "2026-09-09T12:00:00Z")).get_json()
    assert [(f["target"]["name"], f["error_category"]) for f in body["attributions"]] == [("gpu-1", "gpu_off_bus")]


def test_mutated_kernel_logs_are_answered(tmp_path: Path) -> None:
    rng = random.Random(20261207)
    files = [f.read_bytes() for f in sorted(FIXTURES.glob("*.log"))]
    for k in range(EXAMPLES):
        data = _mutated(rng, rng.choice(files), KERNEL_BYTES, 8)
        (tmp_path / "gpu19.log").write_bytes(data)
        provider = TelemetryProvider.from_options(
            {"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path)})
        for detected in (datetime.fromisoformat("2026-09-09T12:00:00+00:00"),  # the fixtures' two days
                         datetime.fromisoformat("2024-03-21T02:10:00+00:00")):
            try:
                provider.fast(make_request(["gpu19", "gpu-1"], detected), Deadline.after_ms(10000), None)
            except Exception as exc:  # noqa: BLE001 - the case is said with the failure
                pytest.fail(f"case {k}: {exc!r} on {data[:600]!r}")


def test_mutated_journal_files_are_answered(tmp_path: Path) -> None:
    # Journal files written by systemd-journal-remote from the fixtures' export text, bytes of their first 48 KiB
    # (the header and the objects; the rest is the file's unused space) flipped or overwritten.
    made = tmp_path / "made"
    made.mkdir()
    for export in sorted(journal_exports.EXPORTS.glob("*.export")):
        write_journal(export.read_bytes(), made / f"{export.stem}.journal")
    files = [(f.name, f.read_bytes()) for f in sorted(made.glob("*.journal"))]
    folder = tmp_path / "journals"
    folder.mkdir()
    rng = random.Random(20261207)
    for k in range(EXAMPLES // 4):
        name, data = rng.choice(files)
        out = bytearray(data)
        for _ in range(rng.randint(1, 10)):
            at = rng.randrange(min(len(out), 48 * 1024))
            roll = rng.random()
            if roll < 0.5:
                out[at] ^= 1 << rng.randrange(8)
            elif roll < 0.8:
                out[at] = rng.choice([0, 1, 0x7F, 0x80, 0xFF])
            else:
                out[at : at + 8] = rng.randbytes(8)
        for old in folder.iterdir():
            old.unlink()
        (folder / name).write_bytes(bytes(out))
        provider = TelemetryProvider.from_options(
            {"ATTRIBUTION_KERNEL_LOG_SOURCE": "journal", "ATTRIBUTION_JOURNAL_DIR": str(folder)})
        for detected in (datetime.fromisoformat("2026-09-09T12:00:00+00:00"),
                         datetime.fromisoformat("2024-03-21T02:10:00+00:00")):
            try:
                provider.fast(make_request(["gpu19", "gpu-1", "worker-01"], detected), Deadline.after_ms(10000), None)
            except Exception as exc:  # noqa: BLE001 - the case is said with the failure
                pytest.fail(f"case {k}: {exc!r} on a mutated {name}")


def test_mutated_job_logs_read_in_buffers_as_line_by_line() -> None:
    rng = random.Random(20261207)
    shapes = sorted(SHAPES)
    for k in range(EXAMPLES * 2):
        shape = rng.choice(shapes)
        lines = [SHAPES[shape](rng.choice(_LINES), i) for i in range(rng.randint(1, 12))]
        data = _mutated(rng, ("\n".join(lines) + "\n").encode(), JOB_BYTES, 6)
        in_buffers, line_by_line, _ = _both(data)
        assert in_buffers == line_by_line, f"case {k} ({shape}): {data!r}"

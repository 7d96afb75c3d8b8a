"""Real journal files for the journal source's tests, written by systemd-journal-remote from Journal Export Format.

The Journal Export Format (systemd's "Journal Export Format" documentation): an entry is its fields, one per line
as `KEY=value`, ended by an empty line; a value holding a newline (or any byte that is not text) is written as the
field name alone on its line, then its length as a 64-bit little-endian integer, the bytes, and a newline.
`__REALTIME_TIMESTAMP` is the entry's time in microseconds since the epoch, UTC.

`systemd-journal-remote --output=FILE.journal -` reads that text on its standard input and writes a journal file
as journald would (Debian: `apt-get install systemd-journal-remote`).
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path

JOURNAL_REMOTE = "/lib/systemd/systemd-journal-remote"
JOURNALCTL = shutil.which("journalctl") or "/usr/bin/journalctl"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def usec(at: datetime) -> int:
    """Microseconds since the epoch, exactly (no float)."""
    delta = at - _EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def export_field(key: str, value: str | bytes) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    if b"\n" in data or any(b < 0x20 and b != 0x09 for b in data):
        return key.encode() + b"\n" + struct.pack("<Q", len(data)) + data + b"\n"
    return key.encode() + b"=" + data + b"\n"


def export_entry(at: datetime | int, fields: Mapping[str, str | bytes]) -> bytes:
    """One entry in the Journal Export Format, at `at` (a datetime or microseconds since the epoch)."""
    stamp = at if isinstance(at, int) else usec(at)
    return export_field("__REALTIME_TIMESTAMP", str(stamp)) + b"".join(
        export_field(k, v) for k, v in fields.items()
    ) + b"\n"


def export_text(entries: Iterable[tuple[datetime | int, Mapping[str, str | bytes]]]) -> bytes:
    return b"".join(export_entry(at, fields) for at, fields in entries)


def have_journal_remote() -> bool:
    return Path(JOURNAL_REMOTE).is_file()


def write_journal(export: bytes, path: Path) -> Path:
    """Write `export` (Journal Export Format) as the journal file `path` (which must end in `.journal`)."""
    if not have_journal_remote():
        raise RuntimeError(
            f"{JOURNAL_REMOTE} is missing: the journal tests need systemd-journal-remote "
            "(Debian: apt-get install systemd-journal-remote; .ci/run installs it)"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [JOURNAL_REMOTE, f"--output={path}", "-"], input=export, capture_output=True, timeout=60
    )
    if done.returncode != 0 or not path.is_file():
        raise RuntimeError(f"systemd-journal-remote failed ({done.returncode}): {done.stderr.decode(errors='replace')}")
    return path

"""The Journal Export Format text of the journal source's tests and samples, made from text trees of real lines.

    python -m tests.telemetry.journal_exports   # writes tests/telemetry/journal/*.export, conf/samples/journal/

Each text file's lines become the entries journald would have kept for them: one entry per kernel record (the lines
of a record, which syslog writes each with the same kernel stamp or dmesg as unstamped continuation lines, are one
entry with a multi-line MESSAGE), `__REALTIME_TIMESTAMP` from the line's time, `_HOSTNAME` from its host (or from
the host folder, for dmesg output), `_TRANSPORT=kernel` and `SYSLOG_IDENTIFIER=kernel` for kernel lines and dmesg
output (other programs' lines get `_TRANSPORT=syslog` and their tag), `_SOURCE_MONOTONIC_TIMESTAMP` from the
kernel's `[seconds]` stamp, and a `_BOOT_ID` per host. A test checks that the committed export text is what this makes.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

from providers.telemetry.kernel.parse import TimeContext, is_continuation, parse_line
from tests.telemetry.journals import export_entry

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
EXPORTS = Path(__file__).resolve().parent / "journal"
SAMPLE_TEXT = ROOT / "conf" / "samples" / "kernel-logs"
SAMPLE_EXPORTS = ROOT / "conf" / "samples" / "journal"
CONTEXT = TimeContext(zone=UTC, anchor=datetime(2026, 9, 9, 12, tzinfo=UTC))

#: real kernel lines of several hosts (SOURCES.md beside them): Xid 79 with SXid, SXid, NVLink Xid 74, Xid 45 after
#: NVLink5, NVLink5 Xid 149, a fallen-off-bus record written line by line, Xid 79 with 119 without kernel stamps
FIXTURE_FILES = (
    "rsyslog-xid79-sxid-interleaved.log",
    "rsyslog-sxid.log",
    "rsyslog-xid74-registers.log",
    "rsyslog-xid45-after-nvlink5.log",
    "rfc5424-nvlink5-fatal.log",
    "rsyslog-probe-off-bus-repeated-prefix.log",
    "journal-short-iso-xid79-xid119.log",
)


def _boot_id(host: str) -> str:
    return hashlib.sha256(f"boot {host}".encode()).hexdigest()[:32]


def entries_of(text: str, folder_host: str | None = None) -> list[tuple[int, dict[str, str]]]:
    """The journal entries of a text file's lines, in file order: (realtime µs, fields)."""
    entries: list[tuple[int, dict[str, str]]] = []
    previous = None
    for line in text.splitlines():
        parsed = parse_line(line, CONTEXT)
        if parsed is None:
            if previous is not None and entries and is_continuation(line, previous):
                entries[-1][1]["MESSAGE"] += "\n" + line.strip()
            continue
        host = parsed.host or folder_host
        if host is None:
            continue
        last = entries[-1][1] if entries else None
        if (
            last is not None
            and previous is not None
            and parsed.mono is not None
            and parsed.mono == previous.mono
            and last["_HOSTNAME"] == host
        ):
            last["MESSAGE"] += "\n" + parsed.message  # one kernel record, written line by line
            previous = parsed
            continue
        delta = parsed.observed_at - datetime(1970, 1, 1, tzinfo=UTC)
        realtime = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
        fields: dict[str, str] = {"_BOOT_ID": _boot_id(host), "_HOSTNAME": host}
        if parsed.tag in ("kernel", None):  # dmesg output names no tag: every line of it is the kernel's
            fields.update({"_TRANSPORT": "kernel", "SYSLOG_IDENTIFIER": "kernel", "SYSLOG_FACILITY": "0"})
            if parsed.mono is not None:
                seconds, _, micro = parsed.mono.strip().partition(".")
                fields["_SOURCE_MONOTONIC_TIMESTAMP"] = str(int(seconds) * 1_000_000 + int(micro.ljust(6, "0")[:6]))
        else:
            fields.update({"_TRANSPORT": "syslog", "SYSLOG_IDENTIFIER": parsed.tag or "-"})
        fields["MESSAGE"] = parsed.message
        entries.append((realtime, fields))
        previous = parsed
    return entries


def export_of(entries: list[tuple[int, dict[str, str]]]) -> bytes:
    return b"".join(export_entry(at, fields) for at, fields in entries)


def fixture_exports() -> dict[str, bytes]:
    """tests/telemetry/journal/<fixture>.export for each of FIXTURE_FILES."""
    return {
        f"{Path(name).stem}.export": export_of(entries_of((FIXTURES / name).read_text(encoding="utf-8")))
        for name in FIXTURE_FILES
    }


def sample_exports() -> dict[str, bytes]:
    """conf/samples/journal/: the sample kernel logs as one export per host and rotation, named as
    systemd-journal-remote names a host's files: `remote-<host>.export` for the current file, and
    `remote-<host>@<rotation>.export` for a rotated one (its journal is an archived file). The combined kern.log
    becomes one file per host it holds."""
    import gzip

    by_name: dict[str, list[tuple[int, dict[str, str]]]] = {}
    for path in sorted(SAMPLE_TEXT.rglob("*")):
        if not path.is_file():
            continue
        relative = path.relative_to(SAMPLE_TEXT)
        folder_host = relative.parts[0] if len(relative.parts) > 1 else None
        if folder_host is None and path.name != "kern.log":
            folder_host = path.name.removesuffix(".log")
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        name = path.name.removesuffix(".gz")
        rotation = name.rsplit(".", 1)[1] if name.rsplit(".", 1)[-1].isdigit() else None
        for at, fields in entries_of(data.decode("utf-8"), folder_host):
            host = fields["_HOSTNAME"]
            key = f"remote-{host}" + (f"@{int(rotation):016x}" if rotation else "")
            by_name.setdefault(key, []).append((at, fields))
    return {f"{key}.export": export_of(sorted(items, key=lambda e: e[0])) for key, items in sorted(by_name.items())}


def main() -> None:
    for folder, exports in ((EXPORTS, fixture_exports()), (SAMPLE_EXPORTS, sample_exports())):
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in exports.items():
            (folder / name).write_bytes(data)
        print(f"{folder}: {len(exports)} export files")


if __name__ == "__main__":
    main()

"""The journal source on real journal files: written by systemd-journal-remote from the Journal Export Format text
kept in tests/telemetry/journal/ and conf/samples/journal/ (made from the real lines of fixtures/ and the sample
text tree by journal_exports.py), read back by libsystemd through cysystemd, checked against journalctl's own
reading, and answering as the same lines do when read from a text tree."""

from __future__ import annotations

import json
import logging
import os
import shutil
import struct
import subprocess
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app import create_app
from app.settings import Settings
from providers.base import AttributionOutcome, ProviderConstructionError
from providers.telemetry import TelemetryProvider
from providers.telemetry.kernel.parse import TimeContext, parse_line
from providers.telemetry.kernel.sources import journal as journal_module
from providers.telemetry.kernel.sources.journal import JournalReaderFile, JournalSource
from tests.telemetry import journal_exports
from tests.telemetry.conftest import DETECTED, deadline, make_request
from tests.telemetry.journals import JOURNALCTL, export_text, usec, write_journal

SAMPLES = journal_exports.ROOT / "conf" / "samples"
TEXT_OPTIONS = {
    "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
    "ATTRIBUTION_KERNEL_LOG_DIR": str(SAMPLES / "kernel-logs"),
    "ATTRIBUTION_EPILOG_DIR": str(SAMPLES / "epilog"),
}
SAMPLE_NODES = ["worker-01", "worker-02", "worker-03", "worker-04", "worker-05", "worker-06"]


@pytest.mark.parametrize("tail", [2**64 - 1, 2**63, 1 << 40])
def test_a_header_whose_last_object_lies_outside_the_file_stops_no_request(
    tmp_path: Path, sample_journals: Path, tail: int
):
    # The header's `tail_object_offset` past 2**63 made the read-ahead's system call raise OverflowError, and the
    # request failed; past the file's end it is no journal's either. A random mutation of the fixtures found it.
    shutil.copyfile(sample_journals / "remote-worker-01.journal", tmp_path / "remote-worker-01.journal")
    data = bytearray((sample_journals / "remote-worker-05.journal").read_bytes())
    data[136:144] = tail.to_bytes(8, "little")
    (tmp_path / "remote-worker-05.journal").write_bytes(bytes(data))
    outcome = _journal_provider(tmp_path).fast(make_request(["worker-01", "worker-05"]), deadline(), None)
    assert [(f.target.name, f.error_category) for f in outcome.attributions][:1] == [("worker-01", "gpu_off_bus")]


def _journals(exports: Path, into: Path) -> Path:
    for export in sorted(exports.glob("*.export")):
        write_journal(export.read_bytes(), into / f"{export.stem}.journal")
    return into


@pytest.fixture(scope="module")
def fixture_journals(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _journals(journal_exports.EXPORTS, tmp_path_factory.mktemp("fixture-journals"))


@pytest.fixture(scope="module")
def sample_journals(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample journals, made by the command the samples ship (make-journals.sh), as the README runs it."""
    folder = tmp_path_factory.mktemp("sample-journals")
    script = journal_exports.SAMPLE_EXPORTS / "make-journals.sh"
    done = subprocess.run(["sh", str(script), str(folder)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{folder}: 11 journal files\n"
    return folder


@pytest.fixture(scope="module")
def fixture_text_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same fixture files as a text tree: `<host>.log` per host, the lines as they are."""
    tree = tmp_path_factory.mktemp("fixture-text")
    for name in journal_exports.FIXTURE_FILES:
        text = (journal_exports.FIXTURES / name).read_text(encoding="utf-8")
        hosts = {e[1]["_HOSTNAME"] for e in journal_exports.entries_of(text)}
        (host,) = hosts
        shutil.copyfile(journal_exports.FIXTURES / name, tree / f"{host}.log")
    return tree


def _fixture_hosts() -> list[str]:
    hosts = []
    for name in journal_exports.FIXTURE_FILES:
        text = (journal_exports.FIXTURES / name).read_text(encoding="utf-8")
        hosts.extend(sorted({e[1]["_HOSTNAME"] for e in journal_exports.entries_of(text)}))
    return hosts


def _journal_provider(folder: Path, **extra: str) -> TelemetryProvider:
    return TelemetryProvider.from_options(
        {"ATTRIBUTION_KERNEL_LOG_SOURCE": "journal", "ATTRIBUTION_JOURNAL_DIR": str(folder), **extra}
    )


def _text_provider(folder: Path, **extra: str) -> TelemetryProvider:
    return TelemetryProvider.from_options(
        {"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(folder), **extra}
    )


def _evidence_lines(message: str) -> list[tuple[object, ...]]:
    """An evidence text, each line read as the parser reads a log line: its kernel stamp and message (a line in no
    format, a dmesg continuation, by its text). The first line's time is kept: a record written line by line has one
    time per line in a text file but one time in the journal, which keeps it as one entry. The host and tag are the
    finding's target and `kernel` for both (a dmesg file names neither on its lines)."""
    ctx = TimeContext(zone=UTC, anchor=DETECTED)
    out: list[tuple[object, ...]] = []
    for i, line in enumerate(message.split("\n")):
        parsed = parse_line(line, ctx)
        if parsed is None:
            out.append((None, None, line.strip()))
            continue
        mono = parsed.mono.strip() if parsed.mono else None
        out.append((parsed.observed_at if i == 0 else None, mono, parsed.message))
    return out


def _comparable(outcome: AttributionOutcome) -> tuple[object, ...]:
    """Everything of an outcome but the evidence's source token (`journal`, `syslog`) and the way its lines were
    written (see _evidence_lines)."""
    findings = [
        (
            f.target,
            f.error_category,
            f.observed_at,
            f.confidence,
            [(e.observed_at, _evidence_lines(e.message)) for e in f.evidence],
        )
        for f in outcome.attributions
    ]
    return (findings, outcome.unattributed_targets, outcome.error)


# ---------------------------------------------------------------- the export text and the files it makes


def test_the_committed_export_text_is_what_the_real_lines_make():
    for folder, made in (
        (journal_exports.EXPORTS, journal_exports.fixture_exports()),
        (journal_exports.SAMPLE_EXPORTS, journal_exports.sample_exports()),
    ):
        assert sorted(p.name for p in folder.glob("*.export")) == sorted(made)
        for name, data in made.items():
            assert (folder / name).read_bytes() == data, f"{name}: run python -m tests.telemetry.journal_exports"


def _journalctl_entries(path: Path) -> list[dict]:
    done = subprocess.run([JOURNALCTL, "--file", str(path), "-o", "json"], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def _field(doc: dict, key: str) -> str | None:
    value = doc.get(key)
    if isinstance(value, list) and all(isinstance(b, int) for b in value):
        return bytes(value).decode("utf-8", "replace")
    return value


def test_the_reader_reads_every_entry_as_journalctl_does(fixture_journals: Path, sample_journals: Path):
    files = sorted(fixture_journals.glob("*.journal")) + sorted(sample_journals.glob("*.journal"))
    assert len(files) == 18
    multi_line = 0
    for path in files:
        reader = JournalReaderFile(str(path))
        ours = list(reader.all_entries())
        theirs = _journalctl_entries(path)
        assert len(ours) == len(theirs) > 0, path
        assert reader.first() == ours[0] and reader.last() == ours[-1], path
        for entry in ours:  # the entry just before any time, and the entries from it on, as journalctl orders them
            earlier = [e for e in ours if e.realtime_usec < entry.realtime_usec]
            assert reader.entry_before(entry.realtime_usec) == (earlier[-1] if earlier else None), path
            assert list(reader.entries_from(entry.realtime_usec)) == ours[len(earlier) :], path
        for mine, doc in zip(ours, theirs, strict=True):
            assert mine.realtime_usec == int(doc["__REALTIME_TIMESTAMP"])
            assert mine.host == doc["_HOSTNAME"]
            assert mine.message == _field(doc, "MESSAGE")
            assert (mine.tag == "kernel") == (doc.get("_TRANSPORT") == "kernel")
            multi_line += "\n" in mine.message
    assert multi_line >= 2  # the fallen-off-bus record written line by line, the sample dmesg record


def test_a_multi_line_message_is_one_entry_and_one_record(fixture_journals: Path):
    path = fixture_journals / "rsyslog-probe-off-bus-repeated-prefix.journal"
    (entry,) = [e for e in JournalReaderFile(str(path)).all_entries() if "\n" in e.message]
    assert entry.message.split("\n") == [
        "NVRM: The NVIDIA GPU 0000:b3:00.0",
        "NVRM: (PCI ID: 10de:26b5) installed in this system has",
        "NVRM: fallen off the bus and is not responding to commands.",
    ]
    assert entry.mono == " 1843.308145"
    outcome = _journal_provider(fixture_journals).fast(make_request(["worker-05"]), deadline(), None)
    (finding,) = outcome.attributions
    assert finding.error_category == "gpu_off_bus"
    (evidence,) = finding.evidence
    assert evidence.source == "journal"
    assert evidence.message.count("NVRM:") == 3


# ---------------------------------------------------------------- the same answers as from a text tree


@pytest.mark.parametrize("host", _fixture_hosts())
def test_each_fixture_host_answers_as_its_text_file_does(host: str, fixture_journals: Path, fixture_text_tree: Path):
    request = make_request([host])
    from_journal = _journal_provider(fixture_journals).fast(request, deadline(), None)
    from_text = _text_provider(fixture_text_tree).fast(request, deadline(), None)
    assert _comparable(from_journal) == _comparable(from_text)
    assert from_journal.attributions or from_journal.unattributed_targets  # each host says something
    for finding in from_journal.attributions:
        assert {e.source for e in finding.evidence} == {"journal"}


def test_all_fixture_hosts_in_one_scope_and_in_one_journal_file(tmp_path: Path, fixture_text_tree: Path):
    # journald on one host, or journal-remote without --split-mode=host: every host's entries in one file.
    entries = []
    for name in journal_exports.FIXTURE_FILES:
        entries.extend(journal_exports.entries_of((journal_exports.FIXTURES / name).read_text(encoding="utf-8")))
    write_journal(export_text(sorted(entries, key=lambda e: e[0])), tmp_path / "system.journal")
    hosts = _fixture_hosts()
    request = make_request(hosts)
    from_journal = _journal_provider(tmp_path).fast(request, deadline(), None)
    from_text = _text_provider(fixture_text_tree).fast(request, deadline(), None)
    assert _comparable(from_journal) == _comparable(from_text)
    categories = {f.error_category for f in from_journal.attributions}
    assert {"gpu_off_bus", "nvlink"} <= categories, categories


def test_the_seed_request_answers_exactly_as_from_the_sample_text_tree(sample_journals: Path):
    request = make_request(["worker-01"])
    from_journal = _journal_provider(sample_journals).fast(request, deadline(), None)
    from_text = TelemetryProvider.from_options(TEXT_OPTIONS).fast(request, deadline(), None)
    (finding,) = from_journal.attributions
    assert finding.error_category == "gpu_off_bus"
    # The very same evidence text, line for line: the journal keeps the kernel's stamp, the source writes it back.
    assert [(e.message, e.observed_at) for e in finding.evidence] == [
        (e.message, e.observed_at) for e in from_text.attributions[0].evidence
    ]
    assert [replace(e, source="syslog") for e in finding.evidence] == list(from_text.attributions[0].evidence)
    assert _comparable(from_journal) == _comparable(from_text)


def test_the_sample_requests_answer_as_from_the_sample_text_tree(sample_journals: Path):
    journal_provider = _journal_provider(sample_journals, ATTRIBUTION_EPILOG_DIR=str(SAMPLES / "epilog"))
    text_provider = TelemetryProvider.from_options(TEXT_OPTIONS)
    for nodes in (SAMPLE_NODES, ["worker-02", "worker-03"], ["worker-04"], ["worker-06"], ["worker-07", "worker-08"]):
        request = make_request(nodes)
        assert _comparable(journal_provider.fast(request, deadline(), None)) == _comparable(
            text_provider.fast(request, deadline(), None)
        ), nodes
    everything = journal_provider.fast(make_request(SAMPLE_NODES), deadline(), None)
    assert [(f.target.name, f.error_category) for f in everything.attributions] == [
        ("worker-01", "gpu_off_bus"),
        ("worker-06", "gpu_off_bus"),
    ]


def test_the_seed_request_through_the_app(sample_journals: Path):
    provider = _journal_provider(sample_journals)
    client = create_app(Settings(provider="telemetry"), provider).test_client()
    body = {
        "schema_version": "0.1.0",
        "workload_id": "12345",
        "scope": {"nodes": ["worker-01"], "ranks": []},
        "failure_context": {"detected_at": "2026-09-09T12:00:00Z", "detection_signal": "application_error"},
        "timeout_ms": 10000,
        "workload_context": {"workflow_id": "training-example", "attempt_index": 0},
        "phase": "fast",
    }
    answer = client.post("/v1/attribution", json=body)
    assert answer.status_code == 200
    data = answer.get_json()
    assert [(a["target"]["name"], a["error_category"]) for a in data["attributions"]] == [("worker-01", "gpu_off_bus")]
    assert data["attributions"][0]["evidence"][0]["source"] == "journal"
    assert data["attributions"][0]["evidence"][0]["message"].startswith(
        "2026-09-09T11:58:12.123481+00:00 worker-01 kernel: [679160.239013] NVRM: Xid (PCI:0000:91:00): 79,"
    )


# ---------------------------------------------------------------- files: archived, dirty, corrupt, truncated


def test_archived_and_dirty_files_are_read_in_machine_id_folders(tmp_path: Path, sample_journals: Path):
    # journald's own layout: <machine-id>/system.journal, archived system@...journal, a dirty file renamed ...~.
    folder = tmp_path / "4f1c0d1e9a8b4c7d8e2f3a4b5c6d7e8f"
    folder.mkdir()
    shutil.copyfile(sample_journals / "remote-worker-01.journal", folder / "system.journal")
    shutil.copyfile(
        sample_journals / "remote-worker-01@0000000000000001.journal",
        folder / "system@00062f0e1a2b3c4d-0000000000000001-00062f0e1a2b3c4d.journal",
    )
    shutil.copyfile(sample_journals / "remote-worker-06.journal", folder / "user-1000@00062f0e1a2b3c4d-5e6f.journal~")
    (folder / "notes.txt").write_text("not a journal")
    outcome = _journal_provider(tmp_path).fast(make_request(["worker-01", "worker-06"]), deadline(), None)
    assert [(f.target.name, f.error_category) for f in outcome.attributions] == [
        ("worker-01", "gpu_off_bus"),
        ("worker-06", "gpu_off_bus"),
    ]


def _bad_copies(tmp_path: Path, good: Path) -> None:
    data = good.read_bytes()
    (tmp_path / "remote-cut.journal").write_bytes(data[: len(data) // 3])  # truncated while copied
    (tmp_path / "remote-scrambled.journal").write_bytes(os.urandom(4096) + data[4096:])  # header destroyed
    (tmp_path / "remote-text.journal").write_text("this is not a journal file\n")
    (tmp_path / "remote-empty.journal").write_bytes(b"")


def test_a_corrupt_or_truncated_file_is_skipped_with_a_warning_naming_it(
    tmp_path: Path, sample_journals: Path, caplog: pytest.LogCaptureFixture
):
    shutil.copyfile(sample_journals / "remote-worker-01.journal", tmp_path / "remote-worker-01.journal")
    _bad_copies(tmp_path, sample_journals / "remote-worker-05.journal")
    # the broken files are named for scope hosts: the source opens them (a file named for another host it never opens)
    scope = ["worker-01", "cut", "scrambled", "text", "empty"]
    with caplog.at_level(logging.WARNING, logger="attribution_adapter.telemetry"):
        outcome = _journal_provider(tmp_path).fast(make_request(scope), deadline(), None)
    assert [(f.target.name, f.error_category) for f in outcome.attributions] == [("worker-01", "gpu_off_bus")]
    warned = " ".join(r.getMessage() for r in caplog.records)
    for name in ("remote-cut.journal", "remote-scrambled.journal", "remote-text.journal", "remote-empty.journal"):
        assert f"journal file {name} could not be read" in warned, warned


def test_only_the_files_of_the_scopes_hosts_and_those_named_for_no_host_are_opened(
    tmp_path: Path, sample_journals: Path, caplog: pytest.LogCaptureFixture
):
    # journal-remote names a sender's files `remote-<host>.journal` (archived `remote-<host>@....journal`): a file
    # named for a host outside the scope is never opened, even a broken one; one named for no host (journald's own,
    # a sender named by its address) may hold any host's entries and is read.
    (tmp_path / "remote-10.0.0.5.journal").write_bytes(
        (sample_journals / "remote-worker-01.journal").read_bytes())  # fmt: skip
    _bad_copies(tmp_path, sample_journals / "remote-worker-05.journal")
    archived = tmp_path / "remote-worker-02@0123456789abcdef0123456789abcdef-0000000000000001-0005f3a2b1c0d0e0.journal"
    archived.write_text("not a journal file\n")
    opened: list[str] = []
    real = journal_module.JournalReaderFile

    class Counting(real):  # type: ignore[misc, valid-type]
        def __init__(self, path: str) -> None:
            opened.append(Path(path).name)
            super().__init__(path)

    journal_module.JournalReaderFile = Counting  # type: ignore[misc]
    try:
        with caplog.at_level(logging.WARNING, logger="attribution_adapter.telemetry"):
            outcome = _journal_provider(tmp_path).fast(make_request(["worker-01", "worker-02"]), deadline(), None)
    finally:
        journal_module.JournalReaderFile = real  # type: ignore[misc]
    assert [(f.target.name, f.error_category) for f in outcome.attributions] == [("worker-01", "gpu_off_bus")]
    assert sorted(opened) == sorted(["remote-10.0.0.5.journal", archived.name])
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert f"journal file {archived.name} could not be read" in warned and "remote-cut" not in warned


def test_symbolic_links_are_followed_and_broken_ones_skipped(
    tmp_path: Path, sample_journals: Path, caplog: pytest.LogCaptureFixture
):
    # Mounted volumes often hold links (a hostPath tree, a synced copy): a link to a journal file is read; a dangling
    # link and a loop name no file and are left out, and the reader refuses them with an OSError, never taking the
    # process down (the reader library itself recurses without end on a link).
    (tmp_path / "remote-worker-01.journal").symlink_to(sample_journals / "remote-worker-01.journal")
    (tmp_path / "remote-gone.journal").symlink_to(tmp_path / "missing.journal")
    (tmp_path / "remote-loop.journal").symlink_to(tmp_path / "remote-loop.journal")
    with caplog.at_level(logging.WARNING, logger="attribution_adapter.telemetry"):
        outcome = _journal_provider(tmp_path).fast(make_request(["worker-01"]), deadline(), None)
    assert [(f.target.name, f.error_category) for f in outcome.attributions] == [("worker-01", "gpu_off_bus")]
    assert JournalReaderFile(str(tmp_path / "remote-worker-01.journal")).first() is not None
    for broken in ("remote-gone.journal", "remote-loop.journal"):
        with pytest.raises(OSError):
            JournalReaderFile(str(tmp_path / broken))


def test_the_window_is_read_by_seeking_the_time_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # A week of one entry a minute (10,080 entries) with the Xid at the failure time: only the window's entries and
    # the ones at its edges are decoded, never the whole file.
    start = DETECTED - timedelta(days=6)
    entries = [
        (start + timedelta(minutes=k), {"_HOSTNAME": "gpu-1", "_TRANSPORT": "kernel", "MESSAGE": f"noise {k}"})
        for k in range(7 * 24 * 60)
    ]
    xid = "NVRM: Xid (PCI:0000:07:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    entries.append((DETECTED - timedelta(seconds=30), {"_HOSTNAME": "gpu-1", "_TRANSPORT": "kernel", "MESSAGE": xid}))
    entries.sort(key=lambda e: e[0])
    write_journal(export_text(entries), tmp_path / "remote-gpu-1.journal")
    decoded = []
    real_entry_of = journal_module.entry_of
    monkeypatch.setattr(journal_module, "entry_of", lambda t, d: decoded.append(t) or real_entry_of(t, d))
    outcome = _journal_provider(tmp_path).fast(make_request(["gpu-1"]), deadline(), None)
    assert [f.error_category for f in outcome.attributions] == ["gpu_off_bus"]
    # The window (lookback 900 s, grace 120 s) and a minute of slack each side: the entries of 11:44 to 12:03, 20 of
    # them, the Xid, the entry just before and the first one past.
    assert len(decoded) <= 20 + 1 + 2, len(decoded)
    assert min(decoded) >= usec(DETECTED - timedelta(minutes=17))
    assert max(decoded) <= usec(DETECTED + timedelta(minutes=4))


def test_read_ahead_asks_for_the_objects_and_never_the_data_hash_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # The header (systemd's Journal File Format): data_hash_table_offset and _size at 104, tail_object_offset at 136;
    # an object's size follows its 8 bytes of type and flags. The file's pages are taken as not in memory (a cold
    # cache), so that the ranges are asked for.
    start = DETECTED - timedelta(hours=20)
    entries = [
        (start + timedelta(minutes=5 * k), {"_HOSTNAME": "gpu-1", "_TRANSPORT": "kernel", "MESSAGE": f"noise {k}"})
        for k in range(240)
    ]
    path = write_journal(export_text(entries), tmp_path / "remote-gpu-1.journal")
    head = path.read_bytes()[:272]
    table, table_size = struct.unpack_from("<QQ", head, 104)
    (tail,) = struct.unpack_from("<Q", head, 136)
    (tail_size,) = struct.unpack_from("<Q", path.read_bytes(), tail + 8)
    asked: list[tuple[int, int]] = []
    real_fadvise = os.posix_fadvise

    def fadvise(fd: int, offset: int, length: int, advice: int) -> None:
        if advice == os.POSIX_FADV_WILLNEED:
            asked.append((offset, offset + length))
        real_fadvise(fd, offset, length, advice)

    monkeypatch.setattr(journal_module, "_in_cache", lambda fd, offset: False)
    monkeypatch.setattr(journal_module.os, "posix_fadvise", fadvise)
    journal_module.read_ahead(str(path))
    assert table > 0 and table_size > 0 and asked
    assert all(end <= table or begin >= table + table_size for begin, end in asked), (asked, table, table_size)
    covered = [begin for begin, _ in asked] + [end for _, end in asked]
    assert min(covered) == 0 and max(covered) == tail + tail_size  # the header up to the end of the last object
    assert any(begin <= table + table_size < end for begin, end in asked)  # the objects after the table
    # and the file reads as before
    reader = JournalReaderFile(str(path))
    assert [e.message for e in reader.all_entries()] == [f"noise {k}" for k in range(240)]


@pytest.mark.parametrize(
    ("ranges", "gap", "left"),
    [
        (((0, 100),), (20, 50), ((0, 20), (50, 50))),  # the gap inside a range: its two sides
        (((0, 10), (60, 40)), (20, 50), ((0, 10), (60, 40))),  # between ranges: nothing taken
        (((0, 30), (40, 20)), (20, 50), ((0, 20), (50, 10))),  # across two ranges' ends
        (((25, 10),), (20, 50), ()),  # a range wholly in the gap
        (((0, 100),), (0, 0), ((0, 100),)),  # no table named
    ],
)
def test_a_range_less_the_hash_table(ranges, gap, left):
    assert journal_module._without(ranges, gap) == left


def test_kernel_messages_by_transport_or_by_a_forwarders_identifier(tmp_path: Path):
    line = "NVRM: Xid (PCI:0000:07:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    at = DETECTED - timedelta(seconds=30)
    write_journal(export_text([
        (at, {"_HOSTNAME": "by-transport", "_TRANSPORT": "kernel", "MESSAGE": line}),
        (at, {"_HOSTNAME": "by-identifier", "SYSLOG_IDENTIFIER": "kernel", "MESSAGE": line}),
        (at, {"_HOSTNAME": "from-a-program", "_TRANSPORT": "syslog", "SYSLOG_IDENTIFIER": "logger", "MESSAGE": line}),
        (at, {"_HOSTNAME": "from-a-program", "_TRANSPORT": "stdout", "_COMM": "python3", "MESSAGE": line}),
    ]), tmp_path / "remote.journal")  # fmt: skip
    outcome = _journal_provider(tmp_path).fast(
        make_request(["by-transport", "by-identifier", "from-a-program"]), deadline(), None
    )
    assert sorted(f.target.name for f in outcome.attributions) == ["by-identifier", "by-transport"]
    # A program's line is no kernel message: the node had telemetry and nothing in it.
    assert [t.name for t in outcome.unattributed_targets] == ["from-a-program"]


def test_a_kernel_stamp_kept_in_the_message_is_read_as_the_text_tree_reads_it(tmp_path: Path):
    # A forwarder that read a text log into the journal leaves the kernel's stamp in MESSAGE.
    line = "NVRM: Xid (PCI:0000:07:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    at = datetime(2026, 9, 9, 11, 59, 30, 120000, tzinfo=UTC)
    write_journal(export_text([(at, {"_HOSTNAME": "gpu-1", "SYSLOG_IDENTIFIER": "kernel",
                                     "MESSAGE": f"[ 1843.308145] {line}"})]), tmp_path / "remote.journal")  # fmt: skip
    (finding,) = _journal_provider(tmp_path).fast(make_request(["gpu-1"]), deadline(), None).attributions
    assert finding.error_category == "gpu_off_bus"
    assert [e.message for e in finding.evidence] == [
        f"2026-09-09T11:59:30.120000+00:00 gpu-1 kernel: [ 1843.308145] {line}"
    ]


def test_node_identity_follows_the_hostname_rule(tmp_path: Path, sample_journals: Path):
    line = "NVRM: Xid (PCI:0000:07:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    at = DETECTED - timedelta(seconds=30)
    write_journal(export_text([
        (at, {"_HOSTNAME": "GPU-7.cluster.local", "_TRANSPORT": "kernel", "MESSAGE": line}),
        (at, {"_HOSTNAME": "gpu-70", "_TRANSPORT": "kernel", "MESSAGE": line}),
    ]), tmp_path / "remote.journal")  # fmt: skip
    outcome = _journal_provider(tmp_path).fast(make_request(["gpu-7"]), deadline(), None)
    assert [f.target.name for f in outcome.attributions] == ["gpu-7"]  # the FQDN in any case; never a prefix


def test_the_journal_settings(tmp_path: Path):
    with pytest.raises(ProviderConstructionError, match="ATTRIBUTION_JOURNAL_DIR is not set"):
        TelemetryProvider.from_options({"ATTRIBUTION_KERNEL_LOG_SOURCE": "journal"})
    with pytest.raises(ProviderConstructionError, match="not an existing directory"):
        _journal_provider(tmp_path / "missing")
    with pytest.raises(ProviderConstructionError, match="'files', 'loki' or 'journal'"):
        TelemetryProvider.from_options({"ATTRIBUTION_KERNEL_LOG_SOURCE": "journald"})
    assert isinstance(_journal_provider(tmp_path).settings.source, JournalSource)


def test_an_empty_journal_directory_is_insufficient_telemetry(tmp_path: Path):
    outcome = _journal_provider(tmp_path).fast(make_request(["worker-01"]), deadline(), None)
    assert outcome.attributions == () and outcome.error is not None
    assert outcome.error.type.value == "insufficient_telemetry"


def test_entry_times_are_utc_microseconds(tmp_path: Path):
    exact = datetime(2026, 9, 9, 11, 59, 1, 999999, tzinfo=UTC)
    line = "NVRM: Xid (PCI:0000:07:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    write_journal(export_text([(exact, {"_HOSTNAME": "gpu-1", "_TRANSPORT": "kernel", "MESSAGE": line})]),
                  tmp_path / "remote.journal")  # fmt: skip
    outcome = _journal_provider(tmp_path, ATTRIBUTION_KERNEL_LOG_TIME_ZONE="America/New_York").fast(
        make_request(["gpu-1"]), deadline(), None
    )
    (finding,) = outcome.attributions
    assert finding.observed_at == exact


def _rotation(folder: Path, rotated_at: datetime, xid_at: datetime) -> None:
    """A node's journal rotated twice, as journal-remote archives it: three files of one entry a minute, the last
    rotation at `rotated_at`, an Xid at `xid_at`."""
    xid = "NVRM: Xid (PCI:0000:07:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    cuts = [DETECTED - timedelta(days=3), DETECTED - timedelta(days=2), rotated_at, DETECTED + timedelta(hours=1)]
    names = ["remote-gpu-1@0001-0000000000000001-0000000000000001.journal",
             "remote-gpu-1@0001-0000000000000b41-0000000000000002.journal", "remote-gpu-1.journal"]  # fmt: skip
    for name, start, end in zip(names, cuts, cuts[1:], strict=False):
        minutes = int((end - start).total_seconds() // 60)
        entries = [(start + timedelta(minutes=k), {"_HOSTNAME": "gpu-1", "_TRANSPORT": "kernel", "MESSAGE": f"n {k}"})
                   for k in range(minutes)]  # fmt: skip
        if start <= xid_at < end:
            entries.append((xid_at, {"_HOSTNAME": "gpu-1", "_TRANSPORT": "kernel", "MESSAGE": xid}))
        write_journal(export_text(sorted(entries, key=lambda e: e[0])), folder / name)


@pytest.mark.parametrize(
    ("rotated_before", "opened"),
    [
        (timedelta(minutes=30), ["remote-gpu-1.journal"]),  # the current file starts before the window
        (timedelta(minutes=5), ["remote-gpu-1.journal", "remote-gpu-1@0001-0000000000000b41-0000000000000002.journal"]),
    ],
)
def test_older_files_of_a_rotation_are_not_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rotated_before: timedelta, opened: list[str]
):
    _rotation(tmp_path, DETECTED - rotated_before, DETECTED - timedelta(minutes=10))
    seen: list[str] = []
    real = journal_module.JournalReaderFile

    def counting(path: str) -> JournalReaderFile:
        seen.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(journal_module, "JournalReaderFile", counting)
    outcome = _journal_provider(tmp_path).fast(make_request(["gpu-1"]), deadline(), None)
    assert [(f.target.name, f.error_category) for f in outcome.attributions] == [("gpu-1", "gpu_off_bus")]
    assert sorted(seen) == sorted(opened)


def test_a_quiet_node_across_a_rotation_has_telemetry(tmp_path: Path):
    # The current file starts inside the window and holds nothing then; the archived one reaches back before it: the
    # node's journal spans the window, so it is unattributed, not without telemetry.
    _rotation(tmp_path, DETECTED - timedelta(minutes=5), DETECTED - timedelta(days=1))
    outcome = _journal_provider(tmp_path, ATTRIBUTION_KERNEL_LOG_LOOKBACK_SECONDS="60").fast(
        make_request(["gpu-1"]), deadline(), None
    )
    assert outcome.attributions == () and [t.name for t in outcome.unattributed_targets] == ["gpu-1"]


def test_a_file_added_after_the_folder_was_listed_is_read(tmp_path: Path, sample_journals: Path):
    # The files are mapped to hosts once per state of their folders; a folder that changes is listed again.
    shutil.copyfile(sample_journals / "remote-worker-01.journal", tmp_path / "remote-worker-01.journal")
    old = (DETECTED - timedelta(days=1)).timestamp()
    os.utime(tmp_path, (old, old))
    provider = _journal_provider(tmp_path)
    first = provider.fast(make_request(["worker-01", "worker-06"]), deadline(), None)
    assert [f.target.name for f in first.attributions] == ["worker-01"]
    shutil.copyfile(sample_journals / "remote-worker-06.journal", tmp_path / "remote-worker-06.journal")
    os.utime(tmp_path, (old + 1, old + 1))  # changed, and settled
    again = provider.fast(make_request(["worker-01", "worker-06"], DETECTED + timedelta(seconds=1)), deadline(), None)
    assert sorted({f.target.name for f in again.attributions}) == ["worker-01", "worker-06"]

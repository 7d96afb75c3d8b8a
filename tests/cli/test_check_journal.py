"""`attribution-adapter check` on the journal source: per file its hosts, time range, kernel entries, and the
files the source cannot open; the same exit rules as for text trees."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.cli.trees import SAMPLES
from tests.telemetry.journals import export_text, write_journal

FAILED = "attribution-adapter check: failed: "


@pytest.fixture
def journals(tmp_path: Path) -> Path:
    folder = tmp_path / "journal"
    for export in sorted((SAMPLES / "journal").glob("*.export")):
        write_journal(export.read_bytes(), folder / f"{export.stem}.journal")
    return folder


def _env(folder: Path) -> dict[str, str]:
    return {
        "ATTRIBUTION_PROVIDER": "telemetry",
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "journal",
        "ATTRIBUTION_JOURNAL_DIR": str(folder),
        "ATTRIBUTION_EPILOG_DIR": str(SAMPLES / "epilog"),
    }


def test_the_sample_journals_pass_and_every_file_is_reported(run_cli, journals: Path):
    summary = run_cli(["check"], _env(journals))
    assert summary.exit_code == 0, summary.output
    files = len(list(journals.iterdir()))
    assert summary.stdout.splitlines()[1:4] == [
        f"kernel logs: journal source, {journals}",
        f"  files: {files}, {files} read ({files} ok); hosts named in their entries: 9",
        "  entries span 2026-09-08T06:12:04.006012Z .. 2026-09-09T12:10:00.500700Z",
    ]
    assert "remote-worker-01.journal" not in summary.stdout  # a file's own line: --verbose
    result = run_cli(["check", "--verbose"], _env(journals))
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()
    assert f"kernel logs: journal source, {journals}" in out
    for line in (
        "  remote-worker-01.journal: ok; 2026-09-09T11:40:02.118204Z .. 2026-09-09T12:03:40.770125Z; "
        "8 entries, 8 kernel; hosts: worker-01",
        "  remote-worker-03@0000000000000001.journal: ok; 2026-09-08T06:12:04.006012Z .. 2026-09-08T23:59:58.023059Z; "
        "3 entries, 3 kernel; hosts: worker-03",
    ):
        assert line in out, result.stdout
    assert result.stdout.endswith("check passed: 0 errors, 0 warnings\n")
    doc = json.loads(run_cli(["check", "--json"], _env(journals)).stdout)
    logs = doc["details"]["kernel_logs"]
    assert logs["source"] == "journal"
    assert [f["path"] for f in logs["files"]] == sorted(p.name for p in journals.iterdir())
    assert all(f["status"] == "ok" and f["kernel_entries"] > 0 for f in logs["files"])


def test_files_the_source_cannot_open_fail_the_check_naming_each(run_cli, journals: Path):
    data = (journals / "remote-worker-05.journal").read_bytes()
    (journals / "remote-cut.journal").write_bytes(data[: len(data) // 3])
    (journals / "remote-scrambled.journal").write_bytes(os.urandom(4096) + data[4096:])
    at = datetime(2026, 9, 9, 11, 50, tzinfo=UTC)
    write_journal(export_text([(at, {"_HOSTNAME": "worker-09", "_TRANSPORT": "syslog", "SYSLOG_IDENTIFIER": "sshd",
                                     "MESSAGE": "Accepted publickey for ops"}),
                               (at, {"_TRANSPORT": "kernel", "MESSAGE": "no host"})]),
                  journals / "remote-worker-09.journal")  # fmt: skip
    result = run_cli(["check", "--verbose"], _env(journals))
    assert result.exit_code == 1
    stderr = result.stderr.splitlines()
    assert len(stderr) == 1 and stderr[0].startswith(FAILED), result.stderr
    problems = result.stdout[result.stdout.index("problems:\n") :]
    for name in ("remote-cut.journal", "remote-scrambled.journal"):
        assert f"  error    {name}: cannot be opened or read as a journal file" in problems, problems
    assert "  warning  remote-worker-09.journal: 1 entries carry no `_HOSTNAME`" in problems
    assert "  remote-worker-09.journal: ok; 2026-09-09T11:50:00Z .. 2026-09-09T11:50:00Z; 2 entries, 1 kernel; " \
        "hosts: worker-09" in result.stdout.splitlines()
    assert result.stdout.endswith("check failed: 2 errors, 1 warning\n")
    doc = json.loads(run_cli(["check", "--json"], _env(journals)).stdout)
    statuses = {f["path"]: f["status"] for f in doc["details"]["kernel_logs"]["files"]}
    assert statuses["remote-cut.journal"] == statuses["remote-scrambled.journal"] == "unreadable"
    assert statuses["remote-worker-01.journal"] == "ok"


def test_a_file_without_kernel_entries_is_a_warning(run_cli, tmp_path: Path):
    at = datetime(2026, 9, 9, 11, 50, tzinfo=UTC)
    write_journal(export_text([(at, {"_HOSTNAME": "worker-09", "_TRANSPORT": "syslog", "SYSLOG_IDENTIFIER": "sshd",
                                     "MESSAGE": "Accepted publickey for ops"})]),
                  tmp_path / "remote-worker-09.journal")  # fmt: skip
    result = run_cli(["check"], _env(tmp_path))
    assert result.exit_code == 0, result.output
    assert "  warning  remote-worker-09.journal: no entry counted is a kernel message" in result.stdout


def test_a_directory_with_no_journal_file_fails(run_cli, tmp_path: Path):
    (tmp_path / "kern.log").write_text("not a journal\n")
    result = run_cli(["check"], _env(tmp_path))
    assert result.exit_code == 1
    assert "holds no journal file the source reads" in result.stderr


def test_only_broken_files_fail_as_having_nothing_to_read(run_cli, tmp_path: Path):
    (tmp_path / "remote-text.journal").write_text("this is not a journal file\n")
    result = run_cli(["check"], _env(tmp_path))
    assert result.exit_code == 1
    assert "no journal file holds an entry the source can read" in result.stdout

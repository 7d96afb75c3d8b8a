"""The `files` source: layout, rotation, binary search by byte offset, failures."""

import os
import time
from datetime import timedelta
from pathlib import Path

import pytest

from providers.base import Deadline, ErrorType, NodeTarget, ProviderProcessingError, ProviderTimeoutError
from providers.telemetry.kernel.collect import Collector
from providers.telemetry.kernel.rules import decoded_events
from providers.telemetry.kernel.sources.facts import FactCache
from providers.telemetry.kernel.sources.files import FileSource
from providers.telemetry.window import Window
from tests.telemetry.conftest import (
    DETECTED,
    HEALTHY,
    at,
    deadline,
    dmesg,
    healthy_lines,
    journal,
    make_request,
    rfc5424,
    rsyslog,
    write_lines,
    xid,
)

WINDOW = Window(at(-15), at(2))


def _scan(root: Path, nodes: list[str], window: Window = WINDOW) -> Collector:
    c = Collector(nodes, window)
    FileSource(root).scan(c, deadline(), None)
    return c


def test_big_file_is_searched_not_read(tmp_path: Path) -> None:
    # One line every second for a day (~10 MB); the 17-minute window must cost a small share of it.
    start = DETECTED - timedelta(hours=20)
    lines = [rsyslog(start + timedelta(seconds=i), "worker-01", HEALTHY + " " + "x" * 20) for i in range(86400)]
    lines[72000 - 30] = rsyslog(at(-0.5), "worker-01", xid(48))  # 12:00 is line 72000
    path = write_lines(tmp_path / "worker-01" / "kern.log", sorted(lines))
    c = _scan(tmp_path, ["worker-01"])
    size = path.stat().st_size
    assert c.bytes_read < size / 20
    assert [e.code for e in decoded_events(c)] == [48]
    assert c.lines_in_window["worker-01"] == 17 * 60 + 1  # 11:45:00..12:02:00, both ends included


def test_lines_outside_window_do_not_count_and_unparseable_lines_are_skipped(tmp_path: Path) -> None:
    write_lines(
        tmp_path / "worker-01.log",
        [
            rsyslog(at(-30), "worker-01", xid(79)),  # before the window
            "garbage without a timestamp",
            "2026-09-09T11:59:00 worker-01 kernel: " + xid(79),  # no offset: refused
            rsyslog(at(-1), "worker-01", HEALTHY),
            rsyslog(at(5), "worker-01", xid(79)),  # after the window
        ],
    )
    c = _scan(tmp_path, ["worker-01"])
    assert decoded_events(c) == []
    assert c.lines_in_window == {"worker-01": 1}


def test_layouts_folder_file_and_combined(tmp_path: Path) -> None:
    write_lines(tmp_path / "worker-01" / "kern.log", [rsyslog(at(-1), "worker-01", xid(48))])
    write_lines(tmp_path / "worker-02.log", [journal(at(-1), "worker-02", xid(74))])
    write_lines(tmp_path / "worker-03", [dmesg(at(-1), xid(95))])  # bare host name, dmesg lines: file names host
    write_lines(
        tmp_path / "syslog",
        [rfc5424(at(-2), "worker-04", xid(64)), rfc5424(at(-2), "worker-99", xid(79))],
    )
    c = _scan(tmp_path, ["worker-01", "worker-02", "worker-03", "worker-04"])
    assert sorted((e.host, e.code) for e in decoded_events(c)) == [
        ("worker-01", 48),
        ("worker-02", 74),
        ("worker-03", 95),
        ("worker-04", 64),
    ]


def test_files_of_hosts_outside_scope_are_never_opened(tmp_path: Path) -> None:
    write_lines(tmp_path / "worker-01.log", [rsyslog(at(-1), "worker-01", HEALTHY)])
    # Unreadable garbage under other hosts' names would fail the request if it were opened.
    (tmp_path / "worker-02.log.gz").write_bytes(b"not gzip at all")
    (tmp_path / "worker-03").mkdir()
    (tmp_path / "worker-03" / "kern.log.gz").write_bytes(b"not gzip at all")
    c = _scan(tmp_path, ["worker-01"])
    assert c.lines_in_window == {"worker-01": 1}


def test_hostnames_match_case_insensitively_and_keep_scope_spelling(tmp_path: Path) -> None:
    write_lines(tmp_path / "kern.log", [rsyslog(at(-1), "Worker-01", xid(48))])
    c = _scan(tmp_path, ["worker-01"])
    assert [e.host for e in decoded_events(c)] == ["worker-01"]


def test_non_kernel_lines_are_not_classified(tmp_path: Path) -> None:
    write_lines(
        tmp_path / "worker-01.log",
        [rsyslog(at(-1), "worker-01", xid(79), tag="logger"), rfc5424(at(-1), "worker-01", xid(79), app="myapp")],
    )
    c = _scan(tmp_path, ["worker-01"])
    assert decoded_events(c) == [] and c.lines_in_window == {"worker-01": 2}


def test_rotation_gz_overlapping_the_window_is_streamed(tmp_path: Path) -> None:
    folder = tmp_path / "worker-01"
    # Rotated at 11:55: the event at 11:50 is in kern.log.1.gz, the current file starts after it.
    write_lines(
        folder / "kern.log.1.gz",
        [rsyslog(at(-40), "worker-01", HEALTHY), rsyslog(at(-10), "worker-01", xid(48))],
        gz=True,
    )
    write_lines(folder / "kern.log", [rsyslog(at(-5), "worker-01", HEALTHY)])
    c = _scan(tmp_path, ["worker-01"])
    assert [e.code for e in decoded_events(c)] == [48]


def test_rotated_files_before_the_window_are_skipped(tmp_path: Path) -> None:
    folder = tmp_path / "worker-01"
    write_lines(folder / "kern.log", [rsyslog(at(-60), "worker-01", HEALTHY), rsyslog(at(-1), "worker-01", xid(48))])
    write_lines(folder / "kern.log.1", [rsyslog(at(-120), "worker-01", HEALTHY)])
    # Older than kern.log.1 whose first line precedes the window: never opened (it would fail if it were).
    (folder / "kern.log.2.gz").write_bytes(b"corrupt")
    (folder / "kern.log-20260901.gz").write_bytes(b"corrupt")
    c = _scan(tmp_path, ["worker-01"])
    assert [e.code for e in decoded_events(c)] == [48]


def test_gz_starting_after_the_window_is_not_streamed(tmp_path: Path) -> None:
    big = [rsyslog(at(60) + timedelta(seconds=i), "worker-01", HEALTHY) for i in range(20000)]
    path = write_lines(tmp_path / "worker-01.log.gz", big, gz=True)
    c = _scan(tmp_path, ["worker-01"])
    assert c.lines_in_window == {} and c.bytes_read < path.stat().st_size


def test_coverage_counts_a_quiet_node_whose_log_spans_the_window(tmp_path: Path) -> None:
    write_lines(
        tmp_path / "worker-01.log", [rsyslog(at(-60), "worker-01", HEALTHY), rsyslog(at(30), "worker-01", HEALTHY)]
    )
    write_lines(tmp_path / "worker-02.log", [rsyslog(at(-60), "worker-02", HEALTHY)])  # stops before the window
    c = _scan(tmp_path, ["worker-01", "worker-02"])
    assert "worker-01" in c.with_telemetry() and "worker-02" not in c.with_telemetry()


def test_corrupt_gz_in_the_window_breaks_only_itself(files_provider, tmp_path: Path, caplog) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "worker-01.log.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    write_lines(tmp_path / "logs" / "worker-02.log", [rsyslog(at(-1), "worker-02", xid(79))])
    with caplog.at_level("WARNING", logger="attribution_adapter.telemetry"):
        outcome = files_provider().fast(make_request(["worker-01", "worker-02"]), deadline(), None)
    assert [f.target for f in outcome.attributions] == [NodeTarget("worker-02")]
    assert outcome.unattributed_targets == ()
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY
    assert any("worker-01.log.gz" in r.getMessage() for r in caplog.records)


def test_a_log_replaced_by_a_fifo_after_listing_breaks_only_itself(
    files_provider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    # A file listed as a regular file and then replaced by a FIFO: opening it must not wait for a writer.
    (tmp_path / "logs" / "worker-01").mkdir(parents=True)
    os.mkfifo(tmp_path / "logs" / "worker-01" / "kern.log")
    write_lines(tmp_path / "logs" / "worker-02.log", [rsyslog(at(-1), "worker-02", xid(79))])
    real_listing = FactCache.listing
    monkeypatch.setattr(
        FactCache,
        "listing",
        lambda self, path, strict, proof=None: [
            (n, p, d, f or n == "kern.log") for n, p, d, f in real_listing(self, path, strict, proof)
        ],
    )
    with caplog.at_level("WARNING", logger="attribution_adapter.telemetry"):
        outcome = files_provider().fast(make_request(["worker-01", "worker-02"]), deadline(), None)
    assert [f.target for f in outcome.attributions] == [NodeTarget("worker-02")]
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY
    assert any("worker-01/kern.log" in r.getMessage() for r in caplog.records)


def test_directory_removed_after_boot_is_a_processing_error(files_provider, tmp_path: Path) -> None:
    provider = files_provider()
    (tmp_path / "logs").rmdir()
    with pytest.raises(ProviderProcessingError):
        provider.fast(make_request(["worker-01"]), deadline(), None)


def test_expired_deadline_is_a_timeout(files_provider, tmp_path: Path) -> None:
    write_lines(tmp_path / "logs" / "worker-01.log", healthy_lines("worker-01", at(-30), at(5)))
    with pytest.raises(ProviderTimeoutError):
        files_provider().fast(make_request(["worker-01"]), Deadline(0.0), None)


def test_end_to_end_per_host_file_finding(files_provider, tmp_path: Path) -> None:
    write_lines(tmp_path / "logs" / "worker-01.log", [rsyslog(at(-1), "worker-01", xid(79))])
    outcome = files_provider().fast(make_request(["worker-01"]), deadline(), None)
    assert [f.target for f in outcome.attributions] == [NodeTarget("worker-01")]
    assert outcome.attributions[0].evidence[0].source == "syslog"


def _settle(*paths: Path, seconds_ago: float = 3600) -> None:
    """Give files and folders a modification time in the past, as logs not written this very second have."""
    when = time.time() - seconds_ago
    for path in paths:
        os.utime(path, (when, when))


def test_a_host_added_after_a_request_is_found_on_the_next(tmp_path: Path) -> None:
    write_lines(tmp_path / "worker-01" / "kern.log", [rsyslog(at(-1), "worker-01", xid(48))])
    _settle(tmp_path / "worker-01" / "kern.log", tmp_path / "worker-01", tmp_path, seconds_ago=7200)
    source = FileSource(tmp_path)
    nodes = ["worker-01", "worker-02"]
    first = Collector(nodes, WINDOW)
    source.scan(first, deadline(), None)
    assert sorted(first.records) == ["worker-01"]
    write_lines(tmp_path / "worker-02.log", [rsyslog(at(-2), "worker-02", xid(79))])
    _settle(tmp_path / "worker-02.log", tmp_path)  # the folder changed: its listing is taken again
    second = Collector(nodes, WINDOW)
    source.scan(second, deadline(), None)
    assert sorted((e.host, e.code) for e in decoded_events(second)) == [("worker-01", 48), ("worker-02", 79)]


def test_unknown_format_is_reported_on_every_request_with_a_warm_cache(tmp_path: Path, caplog) -> None:
    write_lines(tmp_path / "worker-01.log", ["plain dmesg has no time", "[   12.345678] NVRM: Xid 79"])
    write_lines(tmp_path / "worker-02.log.gz", ["not a known format"], gz=True)
    _settle(tmp_path / "worker-01.log", tmp_path / "worker-02.log.gz", tmp_path)
    source = FileSource(tmp_path)
    for _ in range(2):
        caplog.clear()
        c = Collector(["worker-01", "worker-02"], WINDOW)
        with caplog.at_level("WARNING", logger="attribution_adapter.telemetry"):
            source.scan(c, deadline(), None)
        assert c.unreadable_nodes == {"worker-01", "worker-02"}
        messages = [r.getMessage() for r in caplog.records]
        assert any("worker-01.log" in m and "first unreadable line 1" in m for m in messages)
        assert any("worker-02.log.gz" in m and "first unreadable line 1" in m for m in messages)


def test_a_small_scope_in_a_large_directory_plans_what_matching_every_entry_plans(tmp_path: Path, monkeypatch) -> None:
    """In a directory of many hosts, a small scope's folders and files are looked up by short name: the plan is the
    one matching every entry against the scope gives (folders, `<host>.log` files, FQDNs and capitals either side,
    rotated files, combined files, names that only start like a scope node's)."""
    for n in range(120):
        (tmp_path / f"node-{n:03d}").mkdir()
        write_lines(tmp_path / f"node-{n:03d}" / "kern.log", [rsyslog(at(-1), f"node-{n:03d}", HEALTHY)])
    extra = ["NODE-200.cluster.local/kern.log", "node-201.log", "node-201.log.1", "Node-202.log.2.gz",
             "node-2030/kern.log", "node-203x.log", "kern.log", "kern.log.1", "syslog", "node-204.a.log"]  # fmt: skip
    for name in extra:
        path = tmp_path / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(rsyslog(at(-1), "node-201", HEALTHY) + "\n")
    scope = ["node-007", "node-200", "NODE-201.cluster.local", "node-202", "node-203", "node-204.a", "node-119"]
    source = FileSource(tmp_path)
    planned = source.plan(Collector(scope, WINDOW))
    monkeypatch.setattr(FileSource, "_candidates", lambda self, entries, shorts: entries)
    assert planned == FileSource(tmp_path).plan(Collector(scope, WINDOW))
    names = {(node, tuple(f.origin for f in files)) for node, files in planned}
    assert ("node-007", ("node-007/kern.log",)) in names and (None, ("kern.log", "kern.log.1")) in names
    assert ("NODE-201.cluster.local", ("node-201.log", "node-201.log.1")) in names
    assert ("node-202", ("Node-202.log.2.gz",)) in names and ("node-200", ("NODE-200.cluster.local/kern.log",)) in names
    assert not any(node == "node-203" for node, _ in names)

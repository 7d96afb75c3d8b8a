"""Line formats: what the provider reads, what it refuses."""

from datetime import UTC, datetime

from providers.telemetry.kernel.parse import parse_line, parse_timestamp


def test_rsyslog_file_format() -> None:
    p = parse_line("2026-09-09T11:58:12.123456+00:00 worker-01 kernel: NVRM: Xid (PCI:0000:07:00): 79, x")
    assert p is not None
    assert p.observed_at == datetime(2026, 9, 9, 11, 58, 12, 123456, tzinfo=UTC)
    assert (p.host, p.tag) == ("worker-01", "kernel")
    assert p.message == "NVRM: Xid (PCI:0000:07:00): 79, x"


def test_offsets_are_converted_to_utc() -> None:
    p = parse_line("2026-09-09T13:58:12.5+02:00 gpu17 kernel: [680111.646286] NVRM: x")
    assert p is not None and p.observed_at == datetime(2026, 9, 9, 11, 58, 12, 500000, tzinfo=UTC)
    assert p.observed_at.tzinfo is UTC


def test_journalctl_short_iso_with_compact_offset() -> None:
    p = parse_line("2024-05-19T07:08:57+0000 gpu17 kernel: NVRM: Xid (PCI:0000:9b:00): 119, pid=1")
    assert p is not None and p.observed_at == datetime(2024, 5, 19, 7, 8, 57, tzinfo=UTC)
    assert p.host == "gpu17" and p.tag == "kernel"
    p2 = parse_line("2024-05-19T07:08:57-0130 gpu17 kernel: x")
    assert p2 is not None and p2.observed_at == datetime(2024, 5, 19, 8, 38, 57, tzinfo=UTC)


def test_rfc5424() -> None:
    p = parse_line('<4>1 2026-09-09T11:44:10.210331Z worker-04 kernel - - [meta x="1"] NVRM: GPU has fallen')
    assert p is not None and p.host == "worker-04" and p.tag == "kernel" and p.message == "NVRM: GPU has fallen"
    assert parse_line("<4>1 2026-09-09T11:44:10Z worker-04 kernel - - -") is not None  # no MSG at all


def test_dmesg_iso_has_no_host_and_keeps_device_prefix() -> None:
    p = parse_line("2025-01-21T04:41:44,283302+00:00 pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error")
    assert p is not None and p.host is None
    assert p.message.startswith("pcieport 0000:00:01.0:")
    assert p.observed_at == datetime(2025, 1, 21, 4, 41, 44, 283302, tzinfo=UTC)


def test_garbage_lines_are_refused() -> None:
    assert parse_line("") is None
    assert parse_line("not a log line") is None
    assert parse_line("2026-09-09T11:58:12 worker-01 kernel: no offset") is None
    assert parse_line("2026-13-09T11:58:12Z worker-01 kernel: bad month") is None


def test_parse_timestamp_nanoseconds_are_cut_to_microseconds() -> None:
    assert parse_timestamp("2026-09-09T11:58:12.123456789Z") == datetime(2026, 9, 9, 11, 58, 12, 123456, tzinfo=UTC)
    assert parse_timestamp("yesterday") is None


def test_the_search_reads_every_line_time_as_the_parser_does() -> None:
    """line_time (the binary search's probe) gives parse_line's time for every line of the real-format fixtures and
    for odd lines; for lines starting with a digit it reads only the stamp. (Journal JSON lines have a probe of
    their own, which reads `__REALTIME_TIMESTAMP` past 512 bytes too.)"""
    from pathlib import Path

    from providers.telemetry.kernel.parse import TimeContext, line_time

    ctx = TimeContext(anchor=datetime(2026, 9, 9, 12, tzinfo=UTC))
    raws = [
        raw
        for path in sorted((Path(__file__).parent / "fixtures").glob("*.log"))
        for raw in path.read_bytes().split(b"\n")
        if not raw.startswith(b"{")
    ]
    raws += [
        b"2026-09-09T11:58:00.123456+02:00 worker-01 kernel: NVRM: Xid 79\r",
        b"2026-09-09T11:58:00Z",
        b"2026-13-40T11:58:00Z worker-01 kernel: no such day",
        b"2026-09-09 11:58:00,5+00:00 dmesg --time-format iso",
        b"\x002026-09-09T11:58:00Z worker-01 kernel: a NUL first",
        b"2026-09-09T11:58:\x0000Z worker-01 kernel: a NUL inside the stamp",
        b"20 not a stamp",
        b"2026-09-09T11:58:00+0000 h t: \xff\xfe invalid UTF-8",
        b"1",
        b"",
    ]
    assert len(raws) > 120
    for raw in raws:
        parsed = parse_line(raw[:512].decode("utf-8", "replace"), ctx)
        assert line_time(raw, ctx) == (parsed.observed_at if parsed else None), raw

"""The `files` source's fast scan (timestamp blocks, cached listings and file facts) gives exactly what reading the
window line by line gives, and what reading every line of every file gives.

Generated trees mix the line formats the parser knows, hosts, layouts (host folders, `<host>.log`, combined
files), rotation (`.1`, `.2.gz`, lines slightly out of order across it), multi-line records, keyword lines at the
window's edges, CRLF, NUL bytes and invalid UTF-8; then files change between requests under a warm cache (appended,
truncated, rotated, replaced).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.telemetry.kernel.collect import KEYWORDS, Collector
from providers.telemetry.kernel.parse import is_continuation, parse_line
from providers.telemetry.kernel.rules import attribute
from providers.telemetry.kernel.sources import reader as reader_module
from providers.telemetry.kernel.sources.blocks import keyword_lines
from providers.telemetry.kernel.sources.files import FileSource
from providers.telemetry.kernel.sources.search import READ_CHUNK, PlainFile
from providers.telemetry.merge import merge
from providers.telemetry.window import Window
from tests.telemetry.conftest import DETECTED, deadline

HOSTS = ("worker-01", "worker-02", "worker-03", "worker-04", "worker-05", "worker-06")
SCOPE = ["worker-01", "WORKER-02", "worker-03", "worker-04", "worker-05"]
PAST = DETECTED.timestamp() - 3 * 86400  # files' modification times: settled, so their facts are cached
BOOT = datetime(2026, 9, 2, tzinfo=UTC)
NOISE = (
    "IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready",
    "EXT4-fs (nvme0n1p2): re-mounted. Opts: errors=remount-ro. Quota mode: none.",
    "nfs: server storage-07 not responding, still trying",
    "mlx5_core 0000:0c:00.0: FW tracer rotated log buffer",
)
EVENTS = (
    "NVRM: Xid (PCI:0000:07:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error",
    "NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    "NVRM: Xid (PCI:0000:38:00): 13, pid=2291, name=python3, Graphics SM Warp Exception",
    "NVRM: Xid (PCI:0000:9b:00): 119, pid=1, name=x, Timeout after 6s of waiting for RPC response from GPU4 GSP!",
    "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 17 egress non-posted PRIV error",
    "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 30 LTSSM Fault Up",
    "NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.",
    "NVRM: Xid (PCI:0000:10:00): 999, pid=1, name=x, an Xid the catalogue lacks",
)
#: a multi-line kernel record: the first line has no keyword, the second does (syslog repeats the stamp)
AER = (
    "pcieport 0000:00:01.0: AER: Multiple Uncorrected (Fatal) error received: 0000:3b:00.0",
    "nvidia 0000:3b:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID)",
    "nvidia 0000:3b:00.0:   device [10de:2330] error status/mask=00040000/00000000",
)


def _mono(ts: datetime) -> str:
    return f"[{(ts - BOOT).total_seconds():.6f}] "


def _line(fmt: str, ts: datetime, host: str, msg: str, tag: str = "kernel", mono: str | None = None) -> str:
    """One line in `fmt`; `mono` overrides the kernel stamp (records of several lines repeat it)."""
    stamp = mono if mono is not None else _mono(ts)
    if fmt == "rsyslog":
        return f"{ts:%Y-%m-%dT%H:%M:%S.%f}+00:00 {host} {tag}: {stamp}{msg}"
    if fmt == "iso_ms_offset":  # milliseconds, a +02:00 offset: the window's bounds are not exact at this precision
        local = ts.astimezone(datetime.fromisoformat("2026-01-01T00:00:00+02:00").tzinfo)
        return f"{local:%Y-%m-%dT%H:%M:%S}.{local.microsecond // 1000:03d}+02:00 {host} {tag}: {stamp}{msg}"
    if fmt == "short_iso":
        return f"{ts:%Y-%m-%dT%H:%M:%S}+0000 {host} {tag}: {msg}"
    if fmt == "rfc5424":
        return f"<3>1 {ts:%Y-%m-%dT%H:%M:%S.%f}Z {host} {tag} - - - {stamp}{msg}"
    if fmt == "bsd":
        return f"{ts:%b} {ts.day:2d} {ts:%H:%M:%S} {host} {tag}: {stamp}{msg}"
    if fmt == "dmesg":
        return f"{ts:%Y-%m-%dT%H:%M:%S},{ts.microsecond:06d}+00:00 {msg}"
    if fmt == "json":
        doc = {"__REALTIME_TIMESTAMP": str(int(ts.timestamp() * 1_000_000)), "_HOSTNAME": host, "MESSAGE": msg}
        if tag == "kernel":
            doc["_TRANSPORT"] = "kernel"
        else:
            doc["SYSLOG_IDENTIFIER"] = tag
        return json.dumps(doc)
    raise AssertionError(fmt)


FORMATS = (
    *("rsyslog", "rsyslog", "rsyslog", "iso_ms_offset", "iso_ms_offset"),
    *("short_iso", "rfc5424", "bsd", "dmesg", "json"),
)


def _host_lines(
    rng: random.Random, host: str, fmt: str, start: datetime, end: datetime, n: int
) -> list[tuple[datetime, list[str]]]:
    """About `n` groups of lines of `host` (a group: one record's lines) between `start` and `end`, in time order."""
    step = (end - start) / n
    out: list[tuple[datetime, list[str]]] = []
    # the default window's bounds and where reading stops (60 s after its end)
    edges = (DETECTED - timedelta(minutes=15), DETECTED + timedelta(minutes=2), DETECTED + timedelta(minutes=3))
    # A clean host writes mostly plain noise (whole blocks of it take the fast way); a messy one everything.
    scale = 1.0 if rng.random() < 0.4 else 0.1
    for i in range(n):
        ts = start + step * i + timedelta(microseconds=rng.randrange(int(step.total_seconds() * 500_000) + 1))
        roll = rng.random()
        if roll >= 0.03:
            roll = 0.03 + (roll - 0.03) / scale
        if roll < 0.03:
            # a line right at a window edge (the bounds are inclusive), an event or not
            edge = rng.choice(edges) + timedelta(microseconds=rng.choice((-1, 0, 1, 400, 999, -1000)))
            if start <= edge <= end:
                out.append((edge, [_line(fmt, edge, host, rng.choice((*EVENTS, *NOISE, *NOISE)))]))
        elif roll < 0.03:
            out.append((ts, [_line(fmt, ts, host, rng.choice(EVENTS))]))
        elif roll < 0.045 and fmt != "json":
            mono = _mono(ts)
            parts = AER[: rng.randint(2, 3)]
            out.append((ts, [_line(fmt, ts + timedelta(microseconds=k * 20), host, part, mono=mono)
                             for k, part in enumerate(parts)]))  # fmt: skip
        elif roll < 0.055 and fmt == "dmesg":
            out.append((ts, [_line(fmt, ts, host, "NVRM: The NVIDIA GPU 0000:b3:00.0"),
                             "   NVRM: (PCI ID: 10de:26b5) installed in this system has",  # unstamped continuation
                             "   fallen off the bus and is not responding to commands."]))  # fmt: skip
        elif roll < 0.07:
            out.append((ts, [_line(fmt, ts, host, rng.choice(EVENTS), tag="logger")]))  # not the kernel's
        elif roll < 0.075:
            out.append((ts, [_line(fmt, ts, host, rng.choice(NOISE)).replace("link", "li\x00nk")]))
        elif roll < 0.08:
            out.append((ts, [_line(fmt, ts, host, "NV\x00RM: Xid (PCI:0000:07:00): 48, split by a NUL")]))
        elif roll < 0.085:
            out.append((ts, ["garbage line without a timestamp"]))
        elif roll < 0.09:
            out.append((ts, [_line(fmt, ts, host, "mlx5_core: [12.5] a bracket like a kernel stamp, repeated")]))
        else:
            out.append((ts, [_line(fmt, ts, host, rng.choice(NOISE))]))
    out.sort(key=lambda group: group[0])
    for i in range(1, len(out)):
        if rng.random() < 0.02 * scale and out[i][0] - out[i - 1][0] < timedelta(seconds=20):
            out[i - 1], out[i] = out[i], out[i - 1]  # a little disorder, well within the source's slack
    return out


def _flat(groups: list[tuple[datetime, list[str]]]) -> list[str]:
    return [line for _, lines in groups for line in lines]


def _encode(rng: random.Random, lines: list[str]) -> bytes:
    newline = "\r\n" if rng.random() < 0.15 else "\n"
    data = (newline.join(lines) + newline).encode()
    if rng.random() < 0.2:
        data = data.replace(b"becomes", b"bec\xffmes", 3)  # invalid UTF-8
    return data


def _write(path: Path, data: bytes, gz: bool, mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    os.utime(path, (mtime, mtime))


def generate(root: Path, seed: int) -> None:
    """A tree of host folders, `<host>.log` files and a combined `syslog`, rotated; all settled in the past."""
    rng = random.Random(seed)
    span_start = DETECTED - timedelta(hours=rng.choice((1, 2, 3)))
    span_end = DETECTED + timedelta(minutes=rng.choice((-30, 1, 20, 60)))
    combined: list[tuple[datetime, list[str]]] = []
    for host in HOSTS:
        fmt = rng.choice(FORMATS)
        layout = rng.choice(("folder", "folder", "file", "combined"))
        n = rng.randint(200, 2500)
        written = host.upper() if rng.random() < 0.2 else host
        groups = _host_lines(rng, written, fmt, span_start, span_end, n)
        if layout == "combined":
            if fmt != "dmesg":  # dmesg lines carry no host: a combined file cannot hold them
                combined.extend(groups)
            continue
        # Rotation at a random record; the older part is `.1` or `.1.gz`, sometimes a `.2.gz` before it.
        cut = rng.randrange(len(groups))
        older, newer = groups[:cut], groups[cut:]
        if older and newer and rng.random() < 0.3:
            older.append(newer.pop(0))  # the first record of the new file written to the old one
            older[-1], older[-2] = older[-2], older[-1]  # and a little out of order there
        base = Path(host) / "kern.log" if layout == "folder" else Path(f"{host}.log")
        files = [(base, newer, False)]
        if older:
            half = len(older) // 2 if rng.random() < 0.3 else 0
            files.append((base.with_name(base.name + ".1"), older[half:], rng.random() < 0.4))
            if half:
                files.append((base.with_name(base.name + ".2"), older[:half], True))
        for k, (path, part, gz) in enumerate(files):
            name = path.name + (".gz" if gz else "")
            _write(root / path.with_name(name), _encode(rng, _flat(part)), gz, PAST - k * 3600)
    if combined:
        combined.sort(key=lambda group: group[0])  # several senders merged in time order
        _write(root / "syslog", _encode(rng, _flat(combined)), False, PAST)
    for folder in [root, *(p for p in root.iterdir() if p.is_dir())]:
        os.utime(folder, (PAST, PAST))


def full_read(root: Path, nodes: list[str], window: Window) -> Collector:
    """Every line of every in-scope file, through the line parser: no search, no early stop, no cache."""
    c = Collector(nodes, window)
    for node, files in FileSource(root, cache_entries=0).plan(c):
        for f in files:
            raw = Path(f.path).read_bytes()
            data = gzip.decompress(raw) if f.gz else raw
            origin = Path(f.path).relative_to(root).as_posix()
            assert f.origin == origin
            previous = None
            seen: set[str] = set()
            for line in data.split(b"\n"):
                text = line.decode("utf-8", "replace").rstrip("\r").replace("\x00", "")
                parsed = parse_line(text, c.time_context)
                if parsed is None:
                    if previous is not None and is_continuation(text, previous[1]):
                        c.add_continuation(previous[0], text, origin)
                    continue
                target = node if node is not None else c.node_for(parsed.host)
                if target is None:
                    previous = None
                    continue
                seen.add(target)
                c.add_parsed(target, parsed, text, origin)
                previous = (target, parsed)
            for target in seen:
                c.end_origin(target, origin)
    c.finish()
    return c


def state(c: Collector) -> tuple:
    records = {
        node: [(r.observed_at, r.tag, r.lines, r.raw, r.mono) for r in recs] for node, recs in c.records.items()
    }
    return (
        dict(c.lines_in_window),
        sorted(c.seen_before),
        sorted(c.seen_after),
        records,
        sorted(c.unreadable_nodes),
        c.unreadable_combined,
    )


def answer(c: Collector, nodes: list[str]) -> object:
    return merge(nodes, attribute(nodes, c, "syslog"), 5)


def scan(source: FileSource, nodes: list[str], window: Window) -> Collector:
    c = Collector(nodes, window)
    source.scan(c, deadline(), None)
    return c


def windows(rng: random.Random) -> list[Window]:
    edges = Window(DETECTED - timedelta(minutes=15), DETECTED + timedelta(minutes=2))
    # the second: bounds between two milliseconds, so a stamp written in milliseconds cannot equal them
    out = [edges, Window(edges.start + timedelta(microseconds=400), edges.end + timedelta(microseconds=400))]
    for _ in range(1):
        middle = DETECTED + timedelta(seconds=rng.randrange(-5400, 1800), microseconds=rng.randrange(1_000_000))
        out.append(Window(middle - timedelta(minutes=rng.choice((1, 15, 40))), middle + timedelta(minutes=2)))
    return out


def check(fast: FileSource, root: Path, window: Window, nodes: list[str], full: bool = True) -> None:
    """`fast` (its cache as earlier requests left it) against the window read line by line with no cache, and
    (`full`) against every line of every file."""
    slow = scan(FileSource(root, cache_entries=0, by_stamps=False), nodes, window)
    got = scan(fast, nodes, window)
    assert state(got) == state(slow)  # the same collector, line for line
    assert answer(got, nodes) == answer(slow, nodes)
    if full:
        assert answer(got, nodes) == answer(full_read(root, nodes, window), nodes)


def _change(rng: random.Random, root: Path, step: int) -> Window:
    """Change a file the way logging does (append, rotate) or does not (truncate, replace in place) and give it a new
    settled modification time; return a window over the new lines."""
    when = DETECTED + timedelta(hours=2, minutes=10 * step)
    current = sorted(p for p in root.rglob("*") if p.is_file() and "." not in p.name.removesuffix(".log"))
    path = rng.choice(current)
    host = path.parent.name if path.parent != root else path.name.removesuffix(".log")
    if path.name == "syslog":
        host = rng.choice(HOSTS)
    extra = "".join(_line("rsyslog", when + timedelta(seconds=i), host, rng.choice((*EVENTS, *NOISE))) + "\n"
                    for i in range(40)).encode()  # fmt: skip
    data = path.read_bytes()
    kind = rng.choice(("append", "truncate", "rotate", "replace"))
    if kind == "append":
        path.write_bytes(data + extra)
    elif kind == "truncate":
        path.write_bytes(data[: len(data) // 3])
    elif kind == "rotate":
        for k in (2, 1):  # logrotate's shift: .2[.gz] -> .3[.gz], .1[.gz] -> .2[.gz], the file -> .1
            for gz in ("", ".gz"):
                rotated = path.with_name(f"{path.name}.{k}{gz}")
                if rotated.exists():
                    rotated.rename(path.with_name(f"{path.name}.{k + 1}{gz}"))
        path.rename(path.with_name(path.name + ".1"))
        path.write_bytes(extra)
    else:  # rewritten in place with the same size
        path.write_bytes(data.replace(b"ready", b"READY"))
    mtime = PAST + 60 * (step + 1)
    for changed in path.parent.iterdir():
        os.utime(changed, (mtime, mtime))
    os.utime(path.parent, (mtime, mtime))
    return Window(when - timedelta(minutes=15), when + timedelta(minutes=2))


@pytest.mark.parametrize("seed", range(14))
def test_fast_scan_equals_line_by_line_and_full_read(tmp_path: Path, seed: int) -> None:
    rng = random.Random(1000 + seed)
    generate(tmp_path, seed)
    fast = FileSource(tmp_path)  # one source: its cache is warm after the first request
    for window in windows(rng):
        for _ in range(2):
            check(fast, tmp_path, window, SCOPE)
    for step in range(3):
        # Changes such as a truncation can leave the rotation out of time order, where reading the window and
        # reading everything may differ by design; the cached scan must still equal reading the window.
        window = _change(rng, tmp_path, step)
        check(fast, tmp_path, window, SCOPE, full=False)
        check(fast, tmp_path, windows(rng)[0], SCOPE, full=False)


def test_warm_request_reads_less_and_lists_nothing_again(tmp_path: Path, monkeypatch) -> None:
    generate(tmp_path, 3)
    window = Window(DETECTED - timedelta(minutes=15), DETECTED + timedelta(minutes=2))
    source = FileSource(tmp_path)
    cold = scan(source, SCOPE, window)
    calls: list[str] = []
    real = os.scandir
    monkeypatch.setattr(os, "scandir", lambda path: calls.append(str(path)) or real(path))
    warm = scan(source, SCOPE, window)
    assert state(warm) == state(cold)
    assert calls == []  # listings came from the cache
    assert warm.bytes_read < cold.bytes_read  # the binary searches' probes came from the cache


def test_a_file_changed_since_it_was_cached_is_read_anew(tmp_path: Path) -> None:
    window = Window(DETECTED - timedelta(minutes=15), DETECTED + timedelta(minutes=2))
    path = tmp_path / "worker-01" / "kern.log"
    lines = [_line("rsyslog", DETECTED - timedelta(minutes=30) + timedelta(seconds=i), "worker-01", NOISE[0])
             for i in range(3000)]  # fmt: skip
    _write(path, ("\n".join(lines) + "\n").encode(), False, PAST)
    os.utime(path.parent, (PAST, PAST))
    source = FileSource(tmp_path)
    assert scan(source, ["worker-01"], window).records == {}
    lines[1500] = _line("rsyslog", DETECTED - timedelta(minutes=5), "worker-01", EVENTS[1])
    _write(path, ("\n".join(lines) + "\n").encode(), False, PAST + 5)  # rewritten in place, a newer mtime
    got = scan(source, ["worker-01"], window)
    assert [r.lines[0] for r in got.records["worker-01"]] == [EVENTS[1]]


def test_recently_modified_files_are_not_cached(tmp_path: Path) -> None:
    window = Window(DETECTED - timedelta(minutes=15), DETECTED + timedelta(minutes=2))
    lines = [_line("rsyslog", DETECTED - timedelta(minutes=30) + timedelta(seconds=i), "worker-01", NOISE[0])
             for i in range(3000)]  # fmt: skip
    path = tmp_path / "worker-01.log"
    path.write_bytes(("\n".join(lines) + "\n").encode())  # modified just now: its clock tick may not be over
    source = FileSource(tmp_path)
    first = scan(source, ["worker-01"], window)
    unsettled = FileSource(tmp_path, block_bytes=0)  # the same, without blocks: only the file facts could help
    cold = scan(unsettled, ["worker-01"], window)
    again = scan(unsettled, ["worker-01"], window)
    # Not kept by its modification time: its search carries over only once the bytes before its end are found
    # unchanged (one read of its last 4 KiB), as its blocks do.
    assert state(again) == state(cold)
    assert 0 < again.bytes_read < cold.bytes_read and ("file", str(path)) not in unsettled.cache._items
    second = scan(source, ["worker-01"], window)
    # Its blocks are used once the bytes before its end are found unchanged (one read of those bytes).
    assert state(second) == state(first)
    assert 0 < second.bytes_read < first.bytes_read
    assert time.time() - path.stat().st_mtime < 60


def test_cache_is_bounded(tmp_path: Path) -> None:
    generate(tmp_path, 5)
    source = FileSource(tmp_path, cache_entries=3)
    scan(source, SCOPE, Window(DETECTED - timedelta(minutes=15), DETECTED + timedelta(minutes=2)))
    assert len(source.cache._items) <= 3
    assert len(source._groups) <= 1  # a folder's groups of files: a third of the facts (a folder and two files)


def test_keyword_prefilter_is_built_from_the_one_keyword_list() -> None:
    # the block prefilter finds each keyword of the one list, and nothing else
    for keyword in KEYWORDS:
        assert keyword_lines(f"noise\nbefore {keyword} after\nnoise\n".encode()) == [1], keyword
    assert keyword_lines(b"IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready\n") == []
    # every event line the decoder turns into an event holds a keyword, so the prefilter cannot drop one
    for line in (*EVENTS, AER[1]):
        assert keyword_lines(line.encode() + b"\n") == [0], line


@pytest.mark.parametrize("fmt", ["rsyslog", "iso_ms_offset", "short_iso", "dmesg"])
@pytest.mark.parametrize("shift_us", [0, 400, -1])
def test_blocks_of_noise_at_the_window_bounds(tmp_path: Path, fmt: str, shift_us: int) -> None:
    # Plain noise every 250 ms across both bounds and the reading bound: the lines at the bounds are counted from
    # their stamps, at the stamp's own precision, exactly as the line parser places them.
    base = Window(DETECTED - timedelta(minutes=15), DETECTED + timedelta(minutes=2))
    window = Window(base.start + timedelta(microseconds=shift_us), base.end + timedelta(microseconds=shift_us))
    lines = []
    for edge in (base.start, base.end, base.end + timedelta(minutes=1)):
        for i in range(-400, 400):
            ts = edge + timedelta(milliseconds=250 * i)
            lines.append(_line(fmt, ts, "worker-01", NOISE[i % len(NOISE)]))
    _write(tmp_path / "worker-01" / "kern.log", ("\n".join(lines) + "\n").encode(), False, PAST)
    fast = scan(FileSource(tmp_path), ["worker-01"], window)
    slow = scan(FileSource(tmp_path, cache_entries=0, by_stamps=False), ["worker-01"], window)
    assert state(fast) == state(slow)
    assert fast.lines_in_window["worker-01"] > 0


@pytest.mark.parametrize("shift_us", [0, 400])
def test_whole_blocks_at_the_second_the_window_starts(tmp_path: Path, shift_us: int) -> None:
    # Whole blocks of lines stamped in seconds, all at the second the window starts in: when the start lies inside
    # that second they are before it, when it is the second itself they are in the window.
    start = DETECTED - timedelta(minutes=15)
    window = Window(start + timedelta(microseconds=shift_us), DETECTED + timedelta(minutes=2))
    lines = [_line("short_iso", start - timedelta(seconds=s), "worker-01", NOISE[s % 4]) for s in range(300, 0, -1)]
    lines += [_line("short_iso", start, "worker-01", f"{NOISE[i % 4]} {i}") for i in range(1200)]
    lines += [_line("short_iso", start + timedelta(seconds=s), "worker-01", NOISE[s % 4]) for s in range(1, 300)]
    _write(tmp_path / "worker-01" / "kern.log", ("\n".join(lines) + "\n").encode(), False, PAST)
    fast = scan(FileSource(tmp_path), ["worker-01"], window)
    slow = scan(FileSource(tmp_path, cache_entries=0, by_stamps=False), ["worker-01"], window)
    assert state(fast) == state(slow)
    assert fast.lines_in_window["worker-01"] == 299 + (1200 if shift_us == 0 else 0)


def _long_noise(path: Path, minutes: int = 90) -> None:
    """One host's file of plain noise, a line every 200 ms over `minutes` before DETECTED, with one event near it."""
    start = DETECTED - timedelta(minutes=minutes)
    lines = [_line("rsyslog", start + timedelta(milliseconds=200 * i), "worker-01", NOISE[i % len(NOISE)])
             for i in range(minutes * 300)]  # fmt: skip
    lines[-600] = _line("rsyslog", DETECTED - timedelta(minutes=2), "worker-01", EVENTS[1])
    _write(path, ("\n".join(lines) + "\n").encode(), False, PAST)
    os.utime(path.parent, (PAST, PAST))


def test_a_warm_request_with_another_window_reuses_the_blocks_it_shares(tmp_path: Path) -> None:
    """Blocks are read on a fixed grid: a later window overlapping an earlier one reads only what is new to it,
    and still gives exactly what reading its window line by line gives."""
    _long_noise(tmp_path / "worker-01" / "kern.log")
    source = FileSource(tmp_path)
    first = Window(DETECTED - timedelta(minutes=30), DETECTED + timedelta(minutes=2))
    second = Window(DETECTED - timedelta(minutes=20), DETECTED + timedelta(minutes=1))
    cold = scan(source, ["worker-01"], first)
    assert source.blocks.held > 0
    again = scan(source, ["worker-01"], first)
    other = scan(source, ["worker-01"], second)
    for window, got in ((first, again), (second, other)):
        slow = scan(FileSource(tmp_path, cache_entries=0, by_stamps=False), ["worker-01"], window)
        assert state(got) == state(slow)
    # The same window again: the search's answer, the blocks' summaries and where the window's bounds fell in its
    # edge blocks were kept; only the block holding the event's line (parsed) is read again. A window inside the
    # first: its edge blocks are read again too, and its search probes.
    assert again.bytes_read <= READ_CHUNK + 64 < cold.bytes_read // 30
    assert other.bytes_read < cold.bytes_read // 10  # and the probes of its new search


@pytest.mark.parametrize("block_bytes", [0, 40_000, 200_000])
def test_blocks_evicted_mid_request_change_nothing(tmp_path: Path, block_bytes: int) -> None:
    """With a cache holding a few blocks, eviction happens while a request runs: the answer stays exact and the
    cache stays within its bound."""
    generate(tmp_path, 6)
    _long_noise(tmp_path / "worker-01" / "kern.log")
    source = FileSource(tmp_path, block_bytes=block_bytes)
    rng = random.Random(block_bytes)
    for window in windows(rng) * 2:
        check(source, tmp_path, window, SCOPE, full=False)
        assert source.blocks.held <= block_bytes
    if block_bytes:
        assert len(source.blocks) > 0


def test_a_combined_file_parses_only_the_lines_that_can_be_the_scopes_hosts(tmp_path: Path, monkeypatch) -> None:
    """In a combined file, a line naming no scope node's short name (case-insensitively) is another host's: it is
    left out without being parsed, and the answer is still exactly the line-by-line one (a scope node logging
    under its FQDN in capitals, another host's line mentioning a scope node, events of every host)."""
    from providers.telemetry.kernel.sources import reader

    lines = []
    hosts = ("worker-01", "WORKER-02.cluster.local", "storage-17", "login-3", "gpu-9")
    start = DETECTED - timedelta(minutes=40)
    for i in range(6000):
        host = hosts[(i // 10) % 2] if i % 10 == 0 else hosts[2 + i % 3]
        msg = EVENTS[i % len(EVENTS)] if i % 97 == 0 else NOISE[i % len(NOISE)]
        if i == 4500:
            msg = "sshd: session opened for worker-01 from 10.0.0.7"
        lines.append(_line("rsyslog", start + timedelta(milliseconds=400 * i), host, msg))
    _write(tmp_path / "kern.log", ("\n".join(lines) + "\n").encode(), False, PAST)
    os.utime(tmp_path, (PAST, PAST))
    window = Window(DETECTED - timedelta(minutes=15), DETECTED + timedelta(minutes=2))
    nodes = ["worker-01", "worker-02", "worker-05"]
    parsed: list[str] = []
    real = reader.parse_line
    monkeypatch.setattr(reader, "parse_line", lambda text, ctx: parsed.append(text) or real(text, ctx))
    fast = scan(FileSource(tmp_path), nodes, window)
    fast_parsed = len(parsed)
    slow = scan(FileSource(tmp_path, cache_entries=0, by_stamps=False), nodes, window)
    assert state(fast) == state(slow)
    assert answer(fast, nodes) == answer(full_read(tmp_path, nodes, window), nodes)
    assert fast.lines_in_window["worker-01"] > 0 and fast.lines_in_window["worker-02"] > 0
    assert fast_parsed < (len(parsed) - fast_parsed) / 3  # most lines are other hosts': never parsed
    assert any("session opened for worker-01" in text for text in parsed[:fast_parsed])  # named: it is parsed


def test_a_live_log_appended_between_requests_keeps_its_blocks_and_stays_exact(tmp_path: Path, monkeypatch) -> None:
    """A live kern.log grows between requests (modified just now, the same inode): the blocks read before and the
    search made before stand once the bytes before its former end are found unchanged; a file rewritten in place or
    truncated and regrown starts afresh. Every answer is the line-by-line one."""

    probes = _probes(monkeypatch)
    path = tmp_path / "worker-01" / "kern.log"
    path.parent.mkdir()
    start = DETECTED - timedelta(minutes=40)
    lines = [_line("rsyslog", start + timedelta(milliseconds=200 * i), "worker-01", NOISE[i % len(NOISE)])
             for i in range(12000)]  # fmt: skip
    path.write_bytes(("\n".join(lines[:9000]) + "\n").encode())
    window = Window(DETECTED - timedelta(minutes=15), DETECTED + timedelta(minutes=2))
    source = FileSource(tmp_path)

    def exact() -> Collector:
        probes.clear()
        got = scan(source, ["worker-01"], window)
        made = len(probes)  # the probes of this request's search (not of the line-by-line read below)
        assert state(got) == state(scan(FileSource(tmp_path, cache_entries=0, by_stamps=False), ["worker-01"], window))
        del probes[made:]
        return got

    exact()
    with path.open("ab") as log:  # appended in place, as syslog does
        log.write(("\n".join(lines[9000:]) + "\n").encode())
    grown = exact()
    assert probes == []  # neither the first line nor the window's start was searched for again
    afresh = scan(FileSource(tmp_path), ["worker-01"], window)
    # The window's lines before the former end (from line 7500 on) were not read again, but for the grid's blocks
    # at either edge of them.
    before_end = sum(len(line) + 1 for line in lines[7500:9000])
    assert afresh.bytes_read - grown.bytes_read > before_end - 2 * READ_CHUNK
    data = path.read_bytes()
    path.write_bytes(data.replace(b"ready", b"READY").replace(b"tracer", b"TRACER"))  # rewritten, same size
    exact()
    assert probes  # a new lineage: searched afresh
    path.write_bytes(data[: len(data) // 2])  # truncated (copytruncate), then written again
    exact()
    with path.open("ab") as log:
        log.write(lines[-1].encode() + b"\n" + _line("rsyslog", DETECTED, "worker-01", EVENTS[1]).encode() + b"\n")
    assert [r.lines[0] for r in exact().records["worker-01"]] == [EVENTS[1]]


def test_blocks_read_past_the_size_a_request_saw_are_not_trusted_later(tmp_path: Path, monkeypatch) -> None:
    """A log can grow while it is read: blocks read past the size the request saw are kept, but a later request
    only trusts blocks up to the end it verified; bytes past it that changed are read anew."""
    path = tmp_path / "worker-01" / "kern.log"
    path.parent.mkdir()
    start = DETECTED - timedelta(minutes=40)
    lines = [_line("rsyslog", start + timedelta(milliseconds=200 * i), "worker-01", NOISE[i % len(NOISE)])
             for i in range(9000)]  # fmt: skip
    path.write_bytes(("\n".join(lines) + "\n").encode())
    seen_size = len(("\n".join(lines[:6000]) + "\n").encode())
    window = Window(DETECTED - timedelta(minutes=15), DETECTED + timedelta(minutes=2))
    source = FileSource(tmp_path)
    real_fstat = os.fstat

    def fstat_before_growth(fd: int) -> SimpleNamespace:  # the size the file had when the request looked at it
        st = real_fstat(fd)
        return SimpleNamespace(**{**{a: getattr(st, a) for a in dir(st) if a.startswith("st_")}, "st_size": seen_size})

    monkeypatch.setattr(os, "fstat", fstat_before_growth)
    scan(source, ["worker-01"], window)
    monkeypatch.setattr(os, "fstat", real_fstat)
    lines[8000] = _line("rsyslog", start + timedelta(milliseconds=200 * 8000), "worker-01", EVENTS[1])
    path.write_bytes(("\n".join(lines) + "\n").encode())  # the bytes past the seen size changed, not those before
    got = scan(source, ["worker-01"], window)
    assert state(got) == state(scan(FileSource(tmp_path, cache_entries=0, by_stamps=False), ["worker-01"], window))
    assert [r.lines[0] for r in got.records["worker-01"]] == [EVENTS[1]]


@contextmanager
def _searched(path: Path) -> Iterator[PlainFile]:
    """`path` opened as the files source's search reads a plain file."""
    counted = Collector(nodes=("worker-01",), window=Window(DETECTED, DETECTED))
    fd = os.open(path, os.O_RDONLY)
    try:
        yield PlainFile(fd, counted)
    finally:
        os.close(fd)


def _probes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Where each probe of the window search lands from now on (the test's own list, cleared as it needs)."""
    from providers.telemetry.kernel.sources import search

    probes: list[int] = []
    real_probe = search._probe
    monkeypatch.setattr(search, "_probe", lambda f, pos, *rest: probes.append(pos) or real_probe(f, pos, *rest))
    return probes


def test_a_search_asked_again_is_answered_from_the_files_facts(tmp_path: Path) -> None:
    """The same search over an unchanged file is answered from its facts without a probe; the answers kept per file
    are bounded."""
    from providers.telemetry.kernel.parse import DEFAULT_CONTEXT
    from providers.telemetry.kernel.sources import facts as kept
    from providers.telemetry.kernel.sources import search

    path = tmp_path / "worker-01" / "kern.log"
    _long_noise(path)
    facts = kept.FileFacts()
    with _searched(path) as plain:
        size = path.stat().st_size
        targets = [DETECTED - timedelta(minutes=m) for m in range(2 * kept.CACHE_SEARCHES)]
        found = [search.search_offset(plain, size, t, deadline(), DEFAULT_CONTEXT, facts) for t in targets]

        class NoReads:
            def read(self, size: int) -> bytes:
                raise AssertionError("probed again")

            def seek(self, offset: int) -> None:
                raise AssertionError("probed again")

        assert search.search_offset(NoReads(), size, targets[0], deadline(), DEFAULT_CONTEXT, facts) == found[0]  # type: ignore[arg-type]
        assert len(facts.searches) == kept.CACHE_SEARCHES
        assert found == sorted(found, reverse=True) and len(set(found)) > 1  # earlier targets, earlier offsets


def _fixed(line: str, width: int = 128) -> str:
    """`line` padded (or cut) to `width - 1` characters: with its newline, `width` bytes."""
    return (line + " pad" + "x" * width)[: width - 1]


@pytest.mark.parametrize("fmt", ["rsyslog", "iso_ms_offset", "dmesg"])
@pytest.mark.parametrize("seed", range(3))
def test_records_across_the_edges_of_blocks_counted_from_their_summaries(
    tmp_path: Path, monkeypatch, fmt: str, seed: int
) -> None:
    """Lines of 128 bytes, so that the read grid's blocks start every READ_CHUNK // 128 lines: at those starts, a line
    repeating the kernel stamp of the block's last line before it (with a keyword or not, a third line of the record
    after it or not) or an unstamped line that continues it; windows starting and ending at the stamps of blocks'
    first and last lines. Blocks wholly inside a window are counted from their kept summaries, their last line left
    unparsed until a next line could continue it: every answer is the line-by-line one, cold and warm."""
    from providers.telemetry.kernel.sources import reader

    opened: list[int] = []
    real = reader.Reader._open_pending
    monkeypatch.setattr(reader.Reader, "_open_pending", lambda self: opened.append(1) or real(self))
    rng = random.Random(seed)
    start = DETECTED - timedelta(minutes=60)
    lines: list[str] = []
    times: list[datetime] = []
    per_block = READ_CHUNK // 128
    for i in range(per_block * 60):
        ts = start + timedelta(milliseconds=400 * i)
        times.append(ts)
        at_edge = i % per_block
        previous = start + timedelta(milliseconds=400 * (i - 1))
        if i and at_edge in (0, 1) and rng.random() < 0.6:
            kind = rng.choice(("same", "same", "same", "same_keyword", "unstamped", "third"))
            if kind == "unstamped" or (kind == "third" and at_edge == 1):
                lines.append(_fixed("    NVRM: GPU 0000:91:00.0: GPU has fallen off the bus."))
            else:
                msg = EVENTS[1] if kind == "same_keyword" else NOISE[i % len(NOISE)]
                mono = _mono(previous)
                lines.append(_fixed(_line(fmt, ts - timedelta(milliseconds=399), "worker-01", msg, mono=mono)))
            continue
        msg = EVENTS[i % len(EVENTS)] if rng.random() < 0.002 else NOISE[i % len(NOISE)]
        lines.append(_fixed(_line(fmt, ts, "worker-01", msg)))
    assert all(len(line) == 127 for line in lines)
    _write(tmp_path / "worker-01" / "kern.log", ("\n".join(lines) + "\n").encode(), False, PAST)
    os.utime(tmp_path / "worker-01", (PAST, PAST))
    firsts = [times[k] for k in range(per_block, len(times), per_block)]
    lasts = [times[k - 1] for k in range(per_block, len(times), per_block)]
    source = FileSource(tmp_path)
    for _ in range(6):
        begin = rng.choice(firsts + lasts) + timedelta(microseconds=rng.choice((0, 0, -1, 1)))
        end = max(begin, rng.choice(firsts + lasts)) + timedelta(microseconds=rng.choice((0, 0, -1, 1)))
        window = Window(begin, max(end, begin + timedelta(seconds=1)))
        for _ in range(2):  # cold for its blocks, then warm
            check(source, tmp_path, window, ["worker-01"])
    assert len(source.blocks) > 0
    assert opened  # a pending last line was parsed because a next line could continue it


def test_a_record_continued_by_lines_appended_after_a_request(tmp_path: Path) -> None:
    """A live log whose last record goes on in lines appended after a request read it (the record's first line
    ending the blocks kept from that request, the rest written later, repeating its kernel stamp, the keyword only
    there): the kept blocks' last line is parsed when the appended line can continue it, and the record is the one
    reading every line gives."""
    path = tmp_path / "worker-01" / "kern.log"
    path.parent.mkdir()
    start = DETECTED - timedelta(minutes=30)
    lines = [_line("rsyslog", start + timedelta(milliseconds=200 * i), "worker-01", NOISE[i % len(NOISE)])
             for i in range(7000)]  # fmt: skip
    last = start + timedelta(milliseconds=200 * 6999)
    path.write_bytes(("\n".join(lines) + "\n").encode())
    window = Window(DETECTED - timedelta(minutes=15), DETECTED + timedelta(minutes=2))
    source = FileSource(tmp_path)
    check(source, tmp_path, window, ["worker-01"], full=False)
    more = [_line("rsyslog", last + timedelta(microseconds=40), "worker-01", AER[1], mono=_mono(last)),
            _line("rsyslog", last + timedelta(milliseconds=300), "worker-01", NOISE[0])]  # fmt: skip
    with path.open("ab") as log:
        log.write(("\n".join(more) + "\n").encode())
    check(source, tmp_path, window, ["worker-01"], full=False)
    got = scan(source, ["worker-01"], window)
    assert [r.lines for r in got.records["worker-01"]] == [[NOISE[6999 % len(NOISE)], AER[1]]]


_KEYWORD_PIECES = st.sampled_from([*KEYWORDS, "NVR", "SXi", "PCIe Bus", "Killed process", "GS", "x", " ", "\n", "é"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_KEYWORD_PIECES, max_size=60), st.booleans())
def test_a_blocks_keyword_lines_are_those_holding_a_keyword(pieces: list[str], newline_end: bool) -> None:
    # the block's one search for every keyword gives the lines a search of each line for each keyword gives: two on a
    # line, one at a line's start or end, a keyword's own first letters, the last line with or without its newline
    view = "".join(pieces).encode() + (b"\n" if newline_end else b"")
    keywords = [k.encode() for k in KEYWORDS]
    want = [i for i, line in enumerate(view.split(b"\n")) if any(k in line for k in keywords)]
    assert keyword_lines(view) == want


def test_a_window_starting_inside_a_block_read_before_analyses_no_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading starts where the block holding the window's first line starts on the grid: a later window inside an
    earlier one reads blocks whose summaries were kept, and analyses none again."""
    _long_noise(tmp_path / "worker-01" / "kern.log")
    source = FileSource(tmp_path)
    analysed: list[int] = []
    real_analyse = reader_module.analyse
    monkeypatch.setattr(reader_module, "analyse", lambda *a: analysed.append(1) or real_analyse(*a))
    scan(source, ["worker-01"], Window(DETECTED - timedelta(minutes=30), DETECTED + timedelta(minutes=2)))
    assert analysed
    for minutes in (3, 7, 11):
        analysed.clear()
        window = Window(DETECTED - timedelta(minutes=30 - minutes), DETECTED + timedelta(minutes=1))
        got = scan(source, ["worker-01"], window)
        assert analysed == []
        slow = scan(FileSource(tmp_path, cache_entries=0, by_stamps=False), ["worker-01"], window)
        assert state(got) == state(slow)


def test_a_file_met_first_is_read_from_the_line_found_then_from_its_blocks_on_the_grid(tmp_path: Path) -> None:
    """A fresh worker reads a file from the line its search found (no more of it than the window needs); once the
    file was searched, a window is read from where its first block starts on the grid."""
    from providers.telemetry.kernel.parse import DEFAULT_CONTEXT
    from providers.telemetry.kernel.sources import facts as kept
    from providers.telemetry.kernel.sources import search

    path = tmp_path / "worker-01" / "kern.log"
    _long_noise(path)
    size = path.stat().st_size
    with _searched(path) as plain:
        targets = [DETECTED - timedelta(minutes=m) for m in (30, 23, 16, 9)]
        alone = [search.search_offset(plain, size, t, deadline(), DEFAULT_CONTEXT, kept.FileFacts()) for t in targets]
        facts = kept.FileFacts()
        found = [search.search_offset(plain, size, t, deadline(), DEFAULT_CONTEXT, facts) for t in targets]
        assert found[0] == alone[0]
        assert found[1:] == [search.grid_block_start(plain, offset) for offset in alone[1:]]
        assert all(f <= a for f, a in zip(found, alone, strict=True)) and found != alone


def _first_lines_at_or_after(data: bytes, targets: list[datetime]) -> dict[datetime, int]:
    """Each target's first line of `data` whose time is at or after it, as an offset (every line read once)."""
    from providers.telemetry.kernel.parse import DEFAULT_CONTEXT, line_time

    found: dict[datetime, int] = {}
    left = sorted(targets)
    at = 0
    for raw in data.split(b"\n"):
        value = line_time(raw, DEFAULT_CONTEXT)
        while left and value is not None and value >= left[0]:
            found[left.pop(0)] = at
        at += len(raw) + 1
    return {**found, **dict.fromkeys(left, len(data))}


def _first_at_or_after(data: bytes, target: datetime) -> int:
    """The offset of the first line of `data` whose time is at or after `target` (read line by line)."""
    return _first_lines_at_or_after(data, [target])[target]


def test_a_search_starts_between_the_lines_earlier_searches_found(tmp_path: Path, monkeypatch) -> None:
    """The search starts between the lines earlier probes found nearest its target: a target between the two lines
    found nearest an earlier one is found without a probe, one minutes later by fewer probes than a search of the
    whole file; each answer lies at or before the first line at or after its target, within SEARCH_BLOCK and a
    READ_CHUNK of it."""
    from providers.telemetry.kernel.parse import DEFAULT_CONTEXT
    from providers.telemetry.kernel.sources import facts as kept
    from providers.telemetry.kernel.sources import search

    probes = _probes(monkeypatch)
    path = tmp_path / "worker-01" / "kern.log"
    _long_noise(path)
    data = path.read_bytes()
    with _searched(path) as plain:

        def found(target: datetime, facts: kept.FileFacts) -> tuple[int, int]:
            probes.clear()
            offset = search.search_offset(plain, len(data), target, deadline(), DEFAULT_CONTEXT, facts)
            line = _first_at_or_after(data, target)
            assert offset <= line <= offset + search.SEARCH_BLOCK + READ_CHUNK
            return offset, len(probes)

        facts = kept.FileFacts()
        first = DETECTED - timedelta(minutes=30)
        _, whole = found(first, facts)
        assert whole >= 3 and facts.points
        before = max((at, t) for at, t in facts.points.items() if t < first)
        after = min((at, t) for at, t in facts.points.items() if t >= first)
        assert after[0] - before[0] <= search.SEARCH_BLOCK  # the lines found nearest the target on either side
        assert found(before[1] + (after[1] - before[1]) / 2, facts)[1] == 0  # a target between them: no probe
        _, later = found(DETECTED - timedelta(minutes=20), facts)
        _, fresh = found(DETECTED - timedelta(minutes=20), kept.FileFacts())
        assert 0 < later < fresh
        assert len(facts.points) <= kept.CACHE_POINTS
        # lines known that go back in time across the target (a file rewritten under the same facts) are not used:
        # the whole file is searched
        facts.points = {len(data) // 2: DETECTED - timedelta(hours=5), 1000: DETECTED}
        _, anew = found(DETECTED - timedelta(minutes=10), kept.FileFacts())
        assert found(DETECTED - timedelta(minutes=10), facts)[1] == anew


def _bisection_probes(size: int) -> int:
    """The probes a bisection of `size` bytes makes down to SEARCH_BLOCK."""
    from providers.telemetry.kernel.sources import search

    probes = 0
    while size > search.SEARCH_BLOCK:
        size //= 2
        probes += 1
    return probes


def test_a_log_written_at_an_even_pace_is_searched_in_a_few_probes(tmp_path: Path, monkeypatch) -> None:
    """A first search aims each probe where its target's time lies at the pace of the lines known around it: over a
    file written at an even pace it needs at most half a bisection's probes, the first line's time given; each
    answer within its bound of the first line at or after its target."""
    from providers.telemetry.kernel.parse import DEFAULT_CONTEXT
    from providers.telemetry.kernel.sources import facts as kept
    from providers.telemetry.kernel.sources import search

    probes = _probes(monkeypatch)
    path = tmp_path / "worker-01" / "kern.log"
    _long_noise(path)
    data = path.read_bytes()
    with _searched(path) as plain:
        first = search.probe_known(plain, 0, len(data), DEFAULT_CONTEXT, kept.FileFacts())
        assert first[0] == 0 and first[1] is not None
        for minutes in (89, 60, 31, 7, 1):
            target = DETECTED - timedelta(minutes=minutes, seconds=0.3)
            probes.clear()
            facts = kept.FileFacts()
            offset = search.search_offset(plain, len(data), target, deadline(), DEFAULT_CONTEXT, facts, first)
            line = _first_at_or_after(data, target)
            assert offset <= line <= offset + search.SEARCH_BLOCK + READ_CHUNK
            assert 0 < len(probes) <= _bisection_probes(len(data)) // 2
        # a first line with no time known is as none given
        target = DETECTED - timedelta(minutes=20)
        none = (0, None)
        unknown = search.search_offset(plain, len(data), target, deadline(), DEFAULT_CONTEXT, kept.FileFacts(), none)
        assert unknown == search.search_offset(plain, len(data), target, deadline(), DEFAULT_CONTEXT, kept.FileFacts())
        # a target before the first line: the file is read from its start, with no probe
        probes.clear()
        early = first[1] - timedelta(seconds=1)
        assert search.search_offset(plain, len(data), early, deadline(), DEFAULT_CONTEXT, kept.FileFacts(), first) == 0
        assert probes == []


_PACES = st.lists(
    st.tuples(st.integers(1, 400), st.sampled_from((0, 1, 5, 200, 3_600_000)), st.booleans()), min_size=1, max_size=12
)


@settings(max_examples=120, deadline=None)
@given(_PACES, st.lists(st.floats(0.0, 1.0), min_size=1, max_size=6), st.booleans())
def test_a_search_over_a_log_of_any_pace_lies_within_its_bound(
    runs: list[tuple[int, int, bool]], where: list[float], known_first: bool
) -> None:
    """Runs of lines at their own pace (several to a millisecond, bursts after hours of silence), some runs of
    lines with no time: every search's answer lies at or before the first line at or after its target, within
    SEARCH_BLOCK and a READ_CHUNK of it or within SEARCH_BLOCK of the last line with a time before it (lines with no
    time place no search; where they run longer than a probe looks, PROBE_LIMIT, only the first bound holds), and
    takes at most three times a bisection's probes."""
    import tempfile

    from providers.telemetry.kernel.parse import DEFAULT_CONTEXT
    from providers.telemetry.kernel.sources import facts as kept
    from providers.telemetry.kernel.sources import search

    lines: list[str] = []
    at = DETECTED - timedelta(days=2)
    for count, pace_ms, stamped in runs:
        for i in range(count):
            if stamped:
                at += timedelta(milliseconds=pace_ms)
                lines.append(_line("rsyslog", at, "worker-01", NOISE[i % len(NOISE)]))
            else:
                lines.append("    continued without a time " + "x" * (i % 50))
    if not any(stamped for _, _, stamped in runs):
        lines.append(_line("rsyslog", at, "worker-01", NOISE[0]))
    data = ("\n".join(lines) + "\n").encode()
    stamped_at: list[tuple[int, datetime]] = []  # each line with a time: where it starts, its time
    start = 0
    for raw in data.split(b"\n"):
        value = search.line_time(raw, DEFAULT_CONTEXT)
        if value is not None:
            stamped_at.append((start, value))
        start += len(raw) + 1
    times = [t for _, t in stamped_at]
    starts = [at for at, _ in stamped_at]
    longest = max(b - a for a, b in zip([0, *starts], [*starts, len(data)], strict=True))  # bytes with no time
    made = [0]
    real_probe = search._probe

    def counted(*args):  # type: ignore[no-untyped-def]
        made[0] += 1
        return real_probe(*args)

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kern.log"
        path.write_bytes(data)
        search._probe = counted  # type: ignore[assignment]
        try:
            with _searched(path) as plain:
                first = search.probe_known(plain, 0, len(data), DEFAULT_CONTEXT, kept.FileFacts())
                for share in where:
                    target = times[0] + (times[-1] - times[0]) * share + timedelta(microseconds=1)
                    made[0] = 0
                    offset = search.search_offset(
                        plain, len(data), target, deadline(), DEFAULT_CONTEXT, kept.FileFacts(),
                        first if known_first else None,  # type: ignore[arg-type]
                    )
                    line = _first_at_or_after(data, target)
                    last_before = max((at for at, t in stamped_at if t < target), default=0)
                    assert offset <= line
                    if longest < search.PROBE_LIMIT:
                        assert offset >= min(line - search.SEARCH_BLOCK - READ_CHUNK, last_before - search.SEARCH_BLOCK)
                    assert made[0] <= 3 * _bisection_probes(len(data)) + 1
        finally:
            search._probe = real_probe  # type: ignore[assignment]


@pytest.mark.parametrize("gz", [False, True])
def test_a_combined_files_lines_before_the_searchs_target_do_not_show_a_host_reaching_back(
    tmp_path: Path, gz: bool
) -> None:
    """In a file of many hosts, which of a host's lines before the search's target (the window's start less
    ORDER_SLACK) are read depends on where reading starts (the line a first search found, the block holding it on
    the grid later): such a line does not show the host's log reaching back before the window, and every reading
    (cold, warm, not cached, line by line, a gzip stream read from its start) says the same. A line of the host
    between the target and the window's start does."""
    from providers.telemetry.kernel.sources.search import ORDER_SLACK

    window = Window(DETECTED - timedelta(minutes=15), DETECTED + timedelta(minutes=2))
    target = window.start - ORDER_SLACK
    start = window.start - timedelta(hours=3)
    lines = [(start + timedelta(seconds=i), "worker-06", NOISE[i % len(NOISE)]) for i in range(4 * 3600)]
    lines += [
        (target - timedelta(seconds=2, milliseconds=500), "worker-01", NOISE[0]),  # before the target
        (window.start - timedelta(seconds=20, milliseconds=500), "worker-02", NOISE[1]),  # inside the slack
        (window.end + timedelta(seconds=10, milliseconds=500), "worker-01", NOISE[2]),  # both after the window
        (window.end + timedelta(seconds=11, milliseconds=500), "worker-02", NOISE[3]),
    ]
    data = "".join(_line("rsyslog", ts, host, msg) + "\n" for ts, host, msg in sorted(lines)).encode()
    _write(tmp_path / ("syslog.1.gz" if gz else "syslog"), data, gz, PAST)
    nodes = ["worker-01", "worker-02"]
    source = FileSource(tmp_path)
    states = [state(scan(source, nodes, window)) for _ in range(2)]  # cold, then warm (read from the grid)
    states.append(state(scan(FileSource(tmp_path, cache_entries=0), nodes, window)))
    states.append(state(scan(FileSource(tmp_path, cache_entries=0, by_stamps=False), nodes, window)))
    assert all(s == states[0] for s in states)
    collector = scan(FileSource(tmp_path), nodes, window)
    assert collector.seen_before == {"worker-02"} and collector.seen_after == {"worker-01", "worker-02"}
    assert collector.with_telemetry() == {"worker-02"}


def test_a_window_moved_later_inside_the_blocks_read_before_is_found_without_a_probe(
    tmp_path: Path, monkeypatch
) -> None:
    """A window whose start lies inside blocks an earlier request read (the next failure's, minutes later) is found
    from those blocks' first and last times, without a probe, and read exactly as line by line; one starting before
    every block read is searched by probes."""

    probes = _probes(monkeypatch)
    _long_noise(tmp_path / "worker-01" / "kern.log")
    fast = FileSource(tmp_path)

    def probed(window: Window) -> list[int]:
        """The probes the warm source makes for `window`; its reading equals the window's read line by line."""
        probes.clear()
        got = scan(fast, ["worker-01"], window)
        made = list(probes)
        assert state(got) == state(scan(FileSource(tmp_path, cache_entries=0, by_stamps=False), ["worker-01"], window))
        return made

    assert probed(Window(DETECTED - timedelta(minutes=30), DETECTED + timedelta(minutes=2)))
    # a minute after the last each time: some 300 lines of 110 bytes, 2 of the CACHE_SPANS blocks kept
    for moved in (1, 2, 3, 4, 5):
        start = DETECTED - timedelta(minutes=30 - moved, microseconds=-137)
        assert probed(Window(start, start + timedelta(minutes=32))) == [], moved
    assert probed(Window(DETECTED - timedelta(minutes=70), DETECTED + timedelta(minutes=2)))


def _spans_of(path: Path, targets: list[datetime]) -> tuple[object, list[int]]:
    """The facts of `path` after a FileSource read a window at each target, and what its spans say of where each
    target's search starts (`search._spanned`)."""
    from providers.telemetry.kernel.sources import search

    fast = FileSource(path.parent.parent)
    for target in targets:
        scan(fast, ["worker-01"], Window(target, target + timedelta(minutes=2)))
    facts = fast.cache.facts(str(path), path.stat())
    return facts, [search._spanned(facts, t - search.ORDER_SLACK) for t in targets]


def _spans_answering(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The offsets a file's spans give searches from now on (`search._spanned`'s answers other than None)."""
    from providers.telemetry.kernel.sources import search

    answered: list[int] = []
    real_spanned = search._spanned

    def spanned(*args: object) -> int | None:
        offset = real_spanned(*args)  # type: ignore[arg-type]
        if offset is not None:
            answered.append(offset)
        return offset

    monkeypatch.setattr(search, "_spanned", spanned)
    return answered


def _spans(facts: object) -> dict[int, tuple[int, datetime, datetime]]:
    """A file's spans (`FileFacts.spans`, four numbers a block) as block start -> (end, first time, last time)."""
    from providers.telemetry.kernel.parse import EPOCH

    flat = list(facts.spans)  # type: ignore[attr-defined]
    return {
        flat[k]: (flat[k + 1], EPOCH + timedelta(microseconds=flat[k + 2]), EPOCH + timedelta(microseconds=flat[k + 3]))
        for k in range(0, len(flat), 4)
    }


def test_the_blocks_kept_for_a_search_say_where_a_target_lies_as_reading_every_line_does(tmp_path: Path) -> None:
    """Each block kept as a span holds its first and last lines' times; an offset a search takes from them lies at
    or before the first line at or after the target, after a line before it, within a READ_CHUNK and a line of it;
    a target not after a line of any span, after the last one's, or in bytes between two spans not adjacent is left
    to the bisection; at most CACHE_SPANS are kept, the oldest learnt dropped first, and a file appended to keeps
    those before its former end."""
    from array import array

    from providers.telemetry.kernel.parse import DEFAULT_CONTEXT, line_time
    from providers.telemetry.kernel.sources import facts as kept
    from providers.telemetry.kernel.sources import search

    path = tmp_path / "worker-01" / "kern.log"
    _long_noise(path)
    data = path.read_bytes()
    targets = [DETECTED - timedelta(minutes=40, seconds=s) for s in (0, 20, 40)]
    facts, _ = _spans_of(path, targets)
    spans = _spans(facts)
    assert 3 <= len(spans) <= kept.CACHE_SPANS
    for start, (end, low, high) in spans.items():
        lines = data[start:end].rstrip(b"\n").split(b"\n")
        assert data[start - 1 : start] in (b"", b"\n") and data[end - 1 : end] == b"\n"
        assert (low, high) == (line_time(lines[0], DEFAULT_CONTEXT), line_time(lines[-1], DEFAULT_CONTEXT))
    inside = sorted({t for _, low, high in spans.values() for t in (low, high)})
    cases = [t + timedelta(microseconds=d) for t in inside for d in (-1, 0, 1)]
    answered = 0
    for target in cases:
        offset = search._spanned(facts, target)  # type: ignore[arg-type]
        if offset is None:
            continue
        answered += 1
        line = _first_at_or_after(data, target)
        assert offset <= line <= offset + READ_CHUNK + 200
        assert line_time(data[offset : data.index(b"\n", offset)], DEFAULT_CONTEXT) < target
    assert answered > len(cases) // 2
    assert search._spanned(facts, min(low for _, low, _ in spans.values())) is None  # type: ignore[arg-type]
    assert search._spanned(facts, max(h for _, _, h in spans.values()) + timedelta(microseconds=1)) is None  # type: ignore[arg-type]
    # a hole: a span dropped (one between others whose middle time no other span holds: a reading's first block,
    # cut where its window's search landed, may lie inside a whole one), the target between the spans on either side
    flat = facts.spans  # type: ignore[attr-defined]
    ordered = sorted(spans)
    middle_of = {k: spans[k][1] + (spans[k][2] - spans[k][1]) / 2 for k in ordered}
    dropped = next(k for k in ordered[1:-1]
                   if not any(spans[o][1] <= middle_of[k] <= spans[o][2] for o in ordered if o != k))  # fmt: skip
    facts.spans = array("q", [v for k in range(0, len(flat), 4) if flat[k] != dropped for v in flat[k : k + 4]])  # type: ignore[attr-defined]
    assert search._spanned(facts, middle_of[dropped]) is None  # type: ignore[arg-type]
    facts.spans = flat  # type: ignore[attr-defined]
    # bounded, the oldest learnt dropped first
    many = kept.FileFacts()

    def learn(k: int, size: int = 1000) -> None:
        """A block of `size` bytes at 1000 * k whose lines are stamped `k` seconds after DETECTED and a ms later."""
        first = (DETECTED + timedelta(seconds=k)).isoformat().encode()
        last = (DETECTED + timedelta(seconds=k, milliseconds=1)).isoformat().encode()
        search.learn_span(many, 1000 * k, 1000 * k + size, first, last)

    for k in range(kept.CACHE_SPANS + 3):
        learn(k)
    kept_now = [1000 * k for k in range(3, kept.CACHE_SPANS + 3)]
    assert list(_spans(many)) == kept_now  # the oldest learnt dropped first
    times = (DETECTED + timedelta(seconds=4), DETECTED + timedelta(seconds=4, milliseconds=1))
    assert _spans(many)[4000] == (5000, *times)
    learn(4)  # read again: kept where it is
    assert list(_spans(many)) == kept_now
    learn(4, 600)  # other bytes there now (the file rewritten): the block as read now, learnt last
    assert list(_spans(many)) == [k for k in kept_now if k != 4000] + [4000] and _spans(many)[4000] == (4600, *times)
    # appended to: the spans before the former end carry over
    facts.size = max(end for end, _, _ in spans.values())  # type: ignore[attr-defined]
    assert _spans(facts.carried(len(data) + 100)) == spans  # type: ignore[attr-defined]
    facts.size = min(spans) + 1  # type: ignore[attr-defined]
    assert _spans(facts.carried(len(data))) == {}  # type: ignore[attr-defined]


def test_a_blocks_times_read_with_the_requests_time_context_are_not_kept_as_a_span(tmp_path: Path) -> None:
    """Year-less stamps (BSD syslog) read by the request's TimeContext: blocks of them answer no later search."""
    lines = [_line("bsd", DETECTED - timedelta(minutes=60) + timedelta(milliseconds=200 * i), "worker-01",
                   NOISE[i % len(NOISE)]) for i in range(18000)]  # fmt: skip
    path = tmp_path / "worker-01" / "kern.log"
    _write(path, ("\n".join(lines) + "\n").encode(), False, PAST)
    os.utime(path.parent, (PAST, PAST))
    facts, found = _spans_of(path, [DETECTED - timedelta(minutes=30), DETECTED - timedelta(minutes=29)])
    assert _spans(facts) == {} and found == [None, None]


def test_the_fact_cache_holds_a_folder_and_two_files_of_every_host_of_the_largest_scope() -> None:
    from providers.telemetry.kernel.sources.facts import CACHE_ENTRIES
    from schemas.request import ScopeSchema

    assert CACHE_ENTRIES >= 3 * ScopeSchema._declared_fields["nodes"].max_items


def test_a_time_read_with_the_requests_time_context_is_not_kept_as_a_line_found(tmp_path: Path) -> None:
    """A year-less stamp (BSD syslog) reads by the request's TimeContext, which another request may not share: the
    lines its probes find bound no later search."""
    from providers.telemetry.kernel.parse import TimeContext
    from providers.telemetry.kernel.sources import facts as kept
    from providers.telemetry.kernel.sources import search

    start = DETECTED - timedelta(minutes=60)
    lines = [_line("bsd", start + timedelta(milliseconds=200 * i), "worker-01", NOISE[i % len(NOISE)])
             for i in range(18000)]  # fmt: skip
    path = tmp_path / "kern.log"
    path.write_bytes(("\n".join(lines) + "\n").encode())
    with _searched(path) as plain:
        facts = kept.FileFacts()
        ctx = TimeContext(UTC, DETECTED)
        offset = search.search_offset(plain, path.stat().st_size, DETECTED - timedelta(minutes=30), deadline(), ctx,
                                      facts)  # fmt: skip
        assert 0 < offset and facts.points == {}


def _side_by_side(work: Callable[[int], None], threads: int = 4) -> None:
    """`work(i)` in `threads` threads at once, taking turns as often as the interpreter lets them."""
    import sys
    import threading

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        started = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for thread in started:
            thread.start()
        for thread in started:
            thread.join(timeout=60)
    finally:
        sys.setswitchinterval(interval)


def test_threads_searching_one_file_share_its_facts(tmp_path: Path) -> None:
    """Requests read side by side in a worker's threads search the same file with its one FileFacts: each answer
    stays within its bound of the first line at or after its target while the others add the lines they find."""

    from providers.telemetry.kernel.parse import DEFAULT_CONTEXT
    from providers.telemetry.kernel.sources import facts as kept
    from providers.telemetry.kernel.sources import search

    path = tmp_path / "worker-01" / "kern.log"
    _long_noise(path)
    data = path.read_bytes()
    facts = kept.FileFacts()
    facts.searches[(DETECTED - timedelta(hours=2), DEFAULT_CONTEXT)] = 0  # searched before: answers move to blocks
    failures: list[BaseException] = []
    targets = [DETECTED - timedelta(seconds=7 * i) for i in range(200)]
    expected = _first_lines_at_or_after(data, targets)

    def searching(offset: int) -> None:
        try:
            with _searched(path) as plain:
                for t in targets[offset::4]:
                    found = search.search_offset(plain, len(data), t, deadline(), DEFAULT_CONTEXT, facts)
                    assert found <= expected[t] <= found + search.SEARCH_BLOCK + READ_CHUNK
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    _side_by_side(searching)
    assert failures == []


def test_a_span_is_found_by_its_start_not_by_a_time_or_an_end_of_the_same_value() -> None:
    """`FileFacts.spans` holds four numbers a block: a block's start is looked up at the start's place only."""
    from array import array

    from providers.telemetry.kernel.sources import search

    spans = array("q", [100, 200, 5, 7, 200, 300, 8, 100])
    assert search._span_at(spans, 100) == 0 and search._span_at(spans, 200) == 4
    assert search._span_at(spans, 300) == -1 and search._span_at(spans, 8) == -1 and search._span_at(spans, 9) == -1
    assert search._span_at(array("q", [1, 2, 3, 5, 5, 6, 7, 8]), 5) == 4


@pytest.mark.parametrize("seed", range(4))
def test_windows_moving_later_request_after_request_read_as_line_by_line(
    tmp_path: Path, monkeypatch, seed: int
) -> None:
    """The next failures' windows, each a few minutes after the last, over hosts whose lines carry their own zone
    (what blocks kept as spans need), with the parser's whole mix of records, events at the edges, CRLF and invalid
    UTF-8: each read as the window read line by line, and some found from the blocks read before."""

    answered = _spans_answering(monkeypatch)  # the offsets the blocks read before gave a search
    rng = random.Random(2000 + seed)
    for host in HOSTS[:3]:
        fmt = rng.choice(("rsyslog", "iso_ms_offset", "short_iso"))
        groups = _host_lines(rng, host, fmt, DETECTED - timedelta(hours=3), DETECTED + timedelta(hours=1), 9000)
        _write(tmp_path / host / "kern.log", _encode(rng, _flat(groups)), False, PAST)
        os.utime(tmp_path / host, (PAST, PAST))
    os.utime(tmp_path, (PAST, PAST))
    fast = FileSource(tmp_path)
    start = DETECTED - timedelta(minutes=rng.randrange(60, 120), microseconds=rng.randrange(1_000_000))
    found = 0
    for _ in range(10):
        answered.clear()
        check(fast, tmp_path, Window(start, start + timedelta(minutes=rng.choice((2, 15, 40)))), SCOPE, full=False)
        found += len(answered)
        start += timedelta(minutes=rng.randrange(1, 8), microseconds=rng.randrange(1_000_000))
    assert found


@pytest.mark.parametrize("sep", [b"T", b" "])
@pytest.mark.parametrize("fraction", [b"", b".6", b".617", b",6173", b".617348"])
@pytest.mark.parametrize("offset", [b"Z", b"z", b"+00:00", b"+02:00", b"-0530", b"+1400"])
def test_a_spans_times_are_the_instants_the_line_parser_reads(sep: bytes, fraction: bytes, offset: bytes) -> None:
    """A block's stamps (every shape the reader counts blocks in) become the microseconds since the epoch of the
    instant `line_time` reads from a line they start; a stamp of a day that does not exist is refused."""
    from providers.telemetry.kernel.parse import DEFAULT_CONTEXT, EPOCH, line_time
    from providers.telemetry.kernel.sources import search

    for day in (b"2026-09-09", b"2024-02-29", b"1999-12-31"):
        stamp = day + sep + b"23:59:58" + fraction + offset
        read = line_time(stamp + b" worker-01 kernel: [12.5] noise", DEFAULT_CONTEXT)
        assert read is not None
        assert search._microseconds(stamp) == (read - EPOCH) // timedelta(microseconds=1)
    with pytest.raises(ValueError):
        search._microseconds(b"2026-02-30" + sep + b"23:59:58" + fraction + offset)


def test_threads_learning_and_searching_one_files_spans_keep_them_whole(tmp_path: Path, monkeypatch) -> None:
    """Threads of a worker learning blocks into one file's spans and searching them side by side: the spans stay
    four numbers a block, each a block read, and every answer stays within its bound of the first line at or after
    its target."""

    from providers.telemetry.kernel.parse import DEFAULT_CONTEXT
    from providers.telemetry.kernel.sources import facts as kept
    from providers.telemetry.kernel.sources import search

    path = tmp_path / "worker-01" / "kern.log"
    _long_noise(path)
    data = path.read_bytes()
    blocks = []  # (start, end, first stamp, last stamp) of the blocks the reader met, 16 windows apart
    for minutes in range(20, 84, 4):
        facts, _ = _spans_of(path, [DETECTED - timedelta(minutes=minutes)])
        for start, (end, _, _) in _spans(facts).items():
            last = data.rfind(b"\n", start, end - 1) + 1
            blocks.append((start, end, data[start : data.index(b" ", start)], data[last : data.index(b" ", last)]))
    assert len(blocks) > 2 * kept.CACHE_SPANS
    facts = kept.FileFacts()
    failures: list[BaseException] = []
    answered = _spans_answering(monkeypatch)
    targets = [DETECTED - timedelta(minutes=20, seconds=11 * i) for i in range(300)]
    expected = _first_lines_at_or_after(data, targets)

    def working(offset: int) -> None:
        try:
            with _searched(path) as plain:
                for i, t in enumerate(targets[offset::4]):
                    search.learn_span(facts, *blocks[(i * 7 + offset) % len(blocks)])
                    found = search.search_offset(plain, len(data), t, deadline(), DEFAULT_CONTEXT, facts)
                    assert found <= expected[t] <= found + search.SEARCH_BLOCK + READ_CHUNK
                    facts.searches.clear()  # each target searched anew, from the spans where they hold it
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    _side_by_side(working)
    assert failures == [] and answered
    learnt = {(start, end) for start, end, _, _ in blocks}
    assert len(facts.spans) % 4 == 0 and 0 < len(facts.spans) <= 4 * kept.CACHE_SPANS
    assert all((start, end) in learnt for start, (end, _, _) in _spans(facts).items())

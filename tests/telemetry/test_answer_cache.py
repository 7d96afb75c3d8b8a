"""A fast request repeated over unchanged local logs is answered without reading them again, and never past a
change: the answer is always the one a new scan gives (providers/telemetry/answers.py)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from app import create_app
from app.settings import Settings
from providers.telemetry import TelemetryProvider, answers
from providers.telemetry.kernel.sources import facts
from providers.telemetry.kernel.sources.files import FileSource
from tests.telemetry.conftest import DETECTED, at, fast_body, healthy_lines, rsyslog, write_lines, xid

SCOPE = ["worker-01", "worker-02", "worker-03"]
#: longer than a tick of any file-system clock: a change made after it shows in the changed file's times
TICK = 0.05


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files and folders count as settled at once; each test waits TICK before it changes one."""
    monkeypatch.setattr(facts, "CACHE_SETTLE_NS", 0)


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """One entry each time the files source scans."""
    calls: list[object] = []
    real = FileSource.scan

    def counting(self: FileSource, *args: Any, **kwargs: Any) -> None:
        calls.append(args)
        real(self, *args, **kwargs)

    monkeypatch.setattr(FileSource, "scan", counting)
    return calls


def _tree(logs: Path) -> None:
    write_lines(logs / "worker-01" / "kern.log", [rsyslog(at(-2), "worker-01", xid(79, "GPU has fallen off the bus."))])
    write_lines(logs / "worker-02" / "kern.log", healthy_lines("worker-02", at(-30), at(1)))


def _client(logs: Path) -> Any:
    provider = TelemetryProvider.from_options(
        {"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(logs)}
    )
    return create_app(Settings(provider="telemetry"), provider).test_client()


def _ask(client: Any, nodes: list[str] = SCOPE, detected: datetime = DETECTED) -> tuple[Any, ...]:
    response = client.post("/v1/attribution", json=fast_body(nodes, detected.isoformat().replace("+00:00", "Z")))
    assert response.status_code == 200
    data = response.get_json()
    return (data["attributions"], data["unattributed_targets"], data.get("error"))


def test_a_repeated_request_over_unchanged_logs_is_not_scanned_again(
    tmp_path: Path, settled: None, scans: list[object]
) -> None:
    _tree(tmp_path)
    client = _client(tmp_path)
    first = _ask(client)
    assert [f["error_category"] for f in first[0]] == ["gpu_off_bus"]
    assert _ask(client) == first and len(scans) == 1
    # Another window or another scope is another question: scanned.
    _ask(client, detected=at(1))
    _ask(client, nodes=["worker-01"])
    assert len(scans) == 3
    assert _ask(client, detected=at(1)) == _ask(_client(tmp_path), detected=at(1)) and len(scans) == 4


def _append(logs: Path) -> None:
    with open(logs / "worker-02" / "kern.log", "a") as f:
        f.write(rsyslog(at(-1), "worker-02", xid(79, "GPU has fallen off the bus.")) + "\n")


def _same_size_same_mtime(logs: Path) -> None:
    # Xid 79 becomes Xid 13 (an application's error, not the node's): same size, and the former modification time
    # set back. Only the change time tells.
    path = logs / "worker-01" / "kern.log"
    before = path.stat()
    path.write_bytes(path.read_bytes().replace(b"): 79, ", b"): 13, "))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size


def _new_host(logs: Path) -> None:
    write_lines(logs / "worker-03" / "kern.log", [rsyslog(at(-3), "worker-03", xid(79, "GPU has fallen off the bus."))])


def _removed(logs: Path) -> None:
    (logs / "worker-01" / "kern.log").unlink()


def _rotated(logs: Path) -> None:
    (logs / "worker-01" / "kern.log").rename(logs / "worker-01" / "kern.log.1")
    write_lines(logs / "worker-01" / "kern.log", [rsyslog(at(1), "worker-01", xid(48, "DBE (double bit error)."))])


@pytest.mark.parametrize("change", [_append, _same_size_same_mtime, _new_host, _removed, _rotated])
def test_a_change_to_the_logs_is_answered_anew(
    tmp_path: Path, settled: None, scans: list[object], change: Callable[[Path], None]
) -> None:
    _tree(tmp_path)
    client = _client(tmp_path)
    before = _ask(client)
    time.sleep(TICK)
    change(tmp_path)
    after = _ask(client)
    fresh = _ask(_client(tmp_path))
    assert after == fresh != before
    assert len(scans) == 3  # the first, the one after the change, the fresh provider's


def test_a_log_that_cannot_be_read_is_read_and_warned_about_at_every_request(
    tmp_path: Path, settled: None, scans: list[object], caplog: pytest.LogCaptureFixture
) -> None:
    _tree(tmp_path)
    write_lines(tmp_path / "worker-03" / "kern.log", ["not a log line in any known format"])
    client = _client(tmp_path)
    with caplog.at_level(logging.WARNING, logger="attribution_adapter.telemetry"):
        first, second = _ask(client), _ask(client)
    assert first == second and first[2]["type"] == "insufficient_telemetry"
    assert len(scans) == 2
    assert sum("worker-03/kern.log" in r.getMessage() for r in caplog.records) == 2


def test_a_folder_holding_a_link_is_scanned_every_time(tmp_path: Path, settled: None, scans: list[object]) -> None:
    # A link's target can change while the folder holding the link does not.
    _tree(tmp_path / "real")
    (tmp_path / "logs").mkdir()
    for host in ("worker-01", "worker-02"):
        (tmp_path / "logs" / host).symlink_to(tmp_path / "real" / host)
    client = _client(tmp_path / "logs")
    first = _ask(client)
    assert [f["error_category"] for f in first[0]] == ["gpu_off_bus"]
    assert _ask(client) == first and len(scans) == 2


def test_logs_changed_just_now_are_scanned_every_time(tmp_path: Path, scans: list[object]) -> None:
    # Within CACHE_SETTLE_NS of a change its times cannot vouch for the bytes: a later change in the same tick of
    # the file-system clock would not show.
    _tree(tmp_path)
    client = _client(tmp_path)
    assert _ask(client) == _ask(client) and len(scans) == 2
    assert time.time_ns() - (tmp_path / "worker-01" / "kern.log").stat().st_ctime_ns < facts.CACHE_SETTLE_NS


def test_kept_answers_are_bounded(
    tmp_path: Path, settled: None, scans: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(answers, "ANSWER_ENTRIES", 2)
    _tree(tmp_path)
    client = _client(tmp_path)
    for minutes in (0, 1, 2):
        _ask(client, detected=at(minutes))
    _ask(client, detected=at(2))  # kept
    _ask(client, detected=at(0))  # the least recently used: dropped
    assert len(scans) == 4
    # A scope of more than MAX_KEPT_NODES nodes is not kept at all (its key would hold every name).
    many = [f"worker-{i:02d}" for i in range(1, answers.MAX_KEPT_NODES + 2)]
    assert _ask(client, nodes=many) == _ask(client, nodes=many) and len(scans) == 6
    # Nor an answer larger than MAX_ANSWER_BYTES (its evidence texts, the files it read, its targets).
    monkeypatch.setattr(answers, "MAX_ANSWER_BYTES", 1024)
    assert _ask(client, detected=at(3)) == _ask(client, detected=at(3)) and len(scans) == 8


def test_a_provider_made_not_to_keep_answers_scans_every_time(
    tmp_path: Path, settled: None, scans: list[object]
) -> None:
    from providers.telemetry.provider import parse_settings

    _tree(tmp_path)
    options = {"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path)}
    provider = TelemetryProvider(parse_settings(options), keep_answers=False)
    client = create_app(Settings(provider="telemetry"), provider).test_client()
    assert _ask(client) == _ask(client) and len(scans) == 2


def test_the_largest_scope_kept_is_kept_over_a_folder_and_two_files_a_node(
    tmp_path: Path, settled: None, scans: list[object]
) -> None:
    # The byte bound must not refuse what the node bound allows on an ordinary tree: MAX_KEPT_NODES nodes with
    # long names, each a folder holding its log and the rotated one (the window lies in the log: the rotated one is
    # listed, not read).
    nodes = [f"gpu-node-{i:05d}.rack-{i // 8:03d}.cluster.example.internal" for i in range(answers.MAX_KEPT_NODES)]
    for node in nodes:
        write_lines(tmp_path / node / "kern.log.1", healthy_lines(node, at(-600), at(-300)))
        write_lines(tmp_path / node / "kern.log", healthy_lines(node, at(-30), at(1)))
    client = _client(tmp_path)
    first = _ask(client, nodes=nodes)
    assert len(first[1]) == len(nodes)  # every node read and found healthy
    assert _ask(client, nodes=nodes) == first and len(scans) == 1

"""Numbers in what the provider reads that no program writes: digits of other scripts and runs of thousands of digits.

`str.isdigit` is true for `²` and `④`, which `int` refuses; `int` and a `str` pattern's `\\d` take the decimal digits of
every script (`٧٩` is 79); `int` refuses more than 4,300 digits. A job-log, kernel-log or journal line holding such a
number made the request fail (its kernel findings with it), or a line no driver wrote was read as its Xid. Most cases
are asked of the service through the Flask test client, beside the same line with the program's own digits; the
sweeps over every job-log line and the fields a reader checks on its own are asked of the reader.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from app import create_app
from app.settings import Settings
from providers.telemetry import TelemetryProvider
from providers.telemetry.flight_recorder.analysis import _peer
from providers.telemetry.flight_recorder.dumps import Entry
from providers.telemetry.joblog.lines import NodeParser
from providers.telemetry.joblog.prefilter import feed_tail
from providers.telemetry.joblog.rules import conclude
from providers.telemetry.joblog.source import resolver
from providers.telemetry.kernel.sources.journal import kernel_stamp
from tests.joblog import fixtures as fx
from tests.joblog.support import T0, write_tree
from tests.joblog.test_prefilter import _both
from tests.telemetry.conftest import fast_body, rsyslog, write_lines, xid

#: digits no program writes in its numbers: two `int` refuses, three it reads as its own
FOREIGN = ("\u00b2", "\u2463", "\u0667\u0669", "\uff17\uff19", "\u096d\u096f")
LONG = "7" * 5000
DETECTED = T0 + timedelta(minutes=2)


def _ask(root: Path, nodes: list[str], jobs: dict[str, list[str]] | None = None,
         kernel: dict[str, list[str]] | None = None) -> dict[str, Any]:
    (root / "kernel").mkdir(parents=True, exist_ok=True)
    options = {"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(root / "kernel")}
    for node in nodes:
        write_lines(root / "kernel" / f"{node}.log", (kernel or {}).get(node, [
            rsyslog(T0 - timedelta(minutes=5), node, "IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready")]))
    if jobs is not None:
        (root / "jobs").mkdir(exist_ok=True)
        write_tree(root / "jobs", {f"{n}.log": lines for n, lines in jobs.items()}, "job-1", 0)
        options["ATTRIBUTION_JOB_LOG_DIR"] = str(root / "jobs")
    client = create_app(Settings(provider="telemetry"), TelemetryProvider.from_options(options)).test_client()
    answer = client.post("/v1/attribution", json=fast_body(nodes, DETECTED.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                                                             workload_id="job-1"))
    assert answer.status_code == 200
    return answer.get_json()  # type: ignore[no-any-return]


def _outcome(body: dict[str, Any]) -> tuple[Any, ...]:
    """What an answer says, its ids aside."""
    return (
        [(f["target"], f["error_category"], [e["message"] for e in f["evidence"]]) for f in body["attributions"]],
        body["unattributed_targets"], body["error"],
    )


# ---------------------------------------------------------------- job logs


@pytest.mark.parametrize("digit", [*FOREIGN, LONG])
def test_an_nccl_device_in_other_digits_is_not_read_and_the_answer_stands(tmp_path: Path, digit: str) -> None:
    # NCCL's prefix names the CUDA device in brackets (`[4]`): one in other digits, or of 5,000 digits, is no device
    # number; the warning itself is read as before. (`[²]` made the request fail.)
    nodes = ["kp-ddp-worker-0", "kp-ddp-worker-1"]
    own = _ask(tmp_path / "own", nodes, {nodes[0]: list(fx.NCCL_1405_IB)})
    other = [line.replace("[4]", f"[{digit}]") for line in fx.NCCL_1405_IB]
    body = _ask(tmp_path / "other", nodes, {nodes[0]: other})
    assert body["attributions"] == own["attributions"] == []
    assert body["error"] == own["error"]
    assert "kp-ddp-worker-0: its job log holds nccl_net_ib_got_completion_from_peer_with" in body["error"]["message"]


@pytest.mark.parametrize("tasks", ["\u00b2", "0-\u00b2", "\u00b2-3", LONG, "0-" + LONG])
def test_an_srun_task_list_in_other_digits_names_no_rank(tmp_path: Path, tasks: str) -> None:
    # srun's line for the tasks of a node that exited: a task list it cannot have written is read as one naming no
    # task, as a word there is (`task x`).
    nodes = ["node-a", "node-b"]
    line = "srun: error: node-a: task {}: Exited with exit code 1"
    body = _ask(tmp_path / "other", nodes, {"node-a": [line.format(tasks)]})
    word = _ask(tmp_path / "word", nodes, {"node-a": [line.format("x")]})
    assert _outcome(body) == _outcome(word)
    assert "node-a: its job log holds srun_task_exit" in body["error"]["message"]


def _job_lines() -> list[str]:
    """Every job-log line of the fixtures (public reports' own lines)."""
    out: list[str] = []
    for name in dir(fx):
        value = getattr(fx, name)
        if isinstance(value, str) and "\n" not in value and len(value) > 10:
            out.append(value)
        elif isinstance(value, tuple | list) and value and all(isinstance(v, str) for v in value):
            out.extend(value)
    return out


_LINES = _job_lines()
_NUMBER = re.compile(r"[0-9]+")


def _variants(line: str, digit: str) -> list[str]:
    """`line` with each of its first 12 numbers replaced by `digit`, and with `digit` written after it."""
    out = []
    for m in list(_NUMBER.finditer(line))[:12]:
        out.append(line[: m.start()] + digit + line[m.end():])
        out.append(line[: m.end()] + digit + line[m.end():])
    return out


@pytest.mark.parametrize("digit", ["\u00b2", "\u0667", LONG])
def test_no_job_log_line_with_other_digits_stops_the_reader(digit: str) -> None:
    # Each number of each real line replaced (or followed) by other digits, the line read by the node parser as a
    # tail (with Loki's time in front and without) and the job-log rules run over it: nothing raises. (`[²]` in
    # NCCL's prefix did.)
    resolve = resolver(["node-a", "node-b"])
    for line in _LINES:
        for variant in _variants(line, digit):
            for text in (variant, "2026-09-09T11:59:00.000000Z " + variant):
                parser = NodeParser("node-a", resolve)
                feed_tail(parser, (text + "\n").encode())
                conclude(["node-a", "node-b"], [0, 1, 2, 3], {"node-a": parser.result()})


# ---------------------------------------------------------------- kernel logs


def test_an_xid_code_in_other_digits_or_of_thousands_of_digits_is_an_xid_not_understood(tmp_path: Path) -> None:
    # The driver writes an Xid's code in ASCII digits. `79` in Arabic-Indic digits was read as Xid 79 (a GPU off the
    # bus: the node taken out of service on a line no driver wrote); a code of 5,000 digits made the request fail.
    # Such a line is an Xid not understood: said, and its node not called clean.
    def line(code: str) -> str:
        return rsyslog(T0 + timedelta(minutes=1), "gpu-1", xid(79).replace(": 79,", f": {code},"))

    own = _ask(tmp_path / "own", ["gpu-1", "gpu-2"], kernel={"gpu-1": [line("79")]})
    assert [(f["target"]["name"], f["error_category"]) for f in own["attributions"]] == [("gpu-1", "gpu_off_bus")]
    for k, code in enumerate(["\u0667\u0669", "\uff17\uff19", "\u00b2", LONG]):
        body = _ask(tmp_path / str(k), ["gpu-1", "gpu-2"], kernel={"gpu-1": [line(code)]})
        assert body["attributions"] == [], code[:4]
        assert [t["name"] for t in body["unattributed_targets"]] == ["gpu-2"]
        assert body["error"] == {"type": "insufficient_telemetry", "message": (
            "an Xid or SXid the catalogue does not know, or whose line it cannot decode, was seen: Xid of a code that "
            "cannot be read (1 time)")}


def test_an_sxid_code_that_cannot_be_read_is_an_sxid_not_understood(tmp_path: Path) -> None:
    # An NVSwitch SXid line (rsyslog-sxid.log's) whose code is in other digits: no SXid 24007, and not silence either.
    line = (f"{(T0 + timedelta(minutes=1)).isoformat()} gpu-1 kernel: [ 1108.858286] nvidia-nvswitch0: SXid "
            "(PCI:0000:c3:00.0): \u0662\u0664\u0660\u0660\u0667, Fatal, Link 28 sourcetrack timeout error (First)")
    body = _ask(tmp_path, ["gpu-1", "gpu-2"], kernel={"gpu-1": [line]})
    assert body["attributions"] == [] and [t["name"] for t in body["unattributed_targets"]] == ["gpu-2"]
    assert body["error"]["message"].endswith("was seen: SXid of a code that cannot be read (1 time)")


@pytest.mark.parametrize("stamp", ["\u00b2", "\u0661\u0667\u0668\u0668", LONG])
def test_a_journal_export_line_whose_time_is_not_digits_is_skipped_and_the_others_read(
    tmp_path: Path, stamp: str
) -> None:
    # `journalctl -o json` lines: one whose `__REALTIME_TIMESTAMP` no journal wrote (it made the request fail) is
    # not read; the Xid line after it is.
    def doc(micro: str, message: str) -> str:
        return json.dumps({"__REALTIME_TIMESTAMP": micro, "_HOSTNAME": "gpu-1", "_TRANSPORT": "kernel",
                           "SYSLOG_IDENTIFIER": "kernel", "PRIORITY": "4", "MESSAGE": message})

    at = int((T0 + timedelta(minutes=1)).timestamp() * 1_000_000)
    lines = [doc(stamp, "IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready"), doc(str(at), xid(79))]
    body = _ask(tmp_path, ["gpu-1", "gpu-2"], kernel={"gpu-1": lines})
    assert [(f["target"]["name"], f["error_category"]) for f in body["attributions"]] == [("gpu-1", "gpu_off_bus")]


_FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("fixture", sorted(f.name for f in _FIXTURES.glob("*.log")))
def test_no_kernel_log_line_with_other_digits_fails_the_request(tmp_path: Path, fixture: str) -> None:
    # A real kernel-log file (dmesg, syslog, journal exports) followed by its first 60 lines with each number replaced
    # by other digits: the provider answers (whatever it makes of them), never with its own failure. (An Xid code of
    # 5,000 digits and a journal export's time `²` made it fail.)
    lines = (_FIXTURES / fixture).read_text().splitlines()
    options = {"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path)}
    client = create_app(Settings(provider="telemetry"), TelemetryProvider.from_options(options)).test_client()
    for digit in ("\u00b2", "\u0667", LONG):
        variants = [v for line in lines[:60] for v in _variants(line, digit)]
        (tmp_path / "gpu-1.log").write_text("\n".join([*lines, *variants]) + "\n")
        for at in ("2026-09-09T12:00:00Z", "2024-03-21T02:10:00Z"):  # the fixtures' two days
            answer = client.post("/v1/attribution", json=fast_body(["gpu-1"], at))
            assert answer.status_code == 200
            assert answer.get_json().get("error", {}).get("type") != "service_error", (digit[:3], at)


@pytest.mark.parametrize(("value", "expected"), [
    ("12345678", "   12.345678"), ("0", "    0.000000"), (None, None), ("\u00b2", None), ("\u0661\u0662", None),
    (LONG, None), ("-5", None), ("", None),
])
def test_a_journal_entrys_monotonic_time_is_ascii_digits(value: str | None, expected: str | None) -> None:
    # `_SOURCE_MONOTONIC_TIMESTAMP` (microseconds since boot) as the kernel prints it; anything but the digits a
    # journal writes gives no kernel time (`²` made the reader raise).
    assert kernel_stamp(value) == expected


# ---------------------------------------------------------------- flight-recorder dumps


@pytest.mark.parametrize(("op", "expected"), [
    ("nccl:send 0->3", ("send", 3)), ("nccl:recv 3<-0", ("recv", 0)), ("nccl:send 0->\u00b2", None),
    ("nccl:send \u0661->\u0663", None), (f"nccl:send 0->{LONG}", None),
])
def test_a_point_to_point_entrys_peer_is_ascii_digits(op: str, expected: tuple[str, int] | None) -> None:
    entry = Entry("0", "", None, 0, op, True, "completed", True, None, None, None, None, None)
    assert _peer(entry) == expected


def _arabic_indic(text: str) -> str:
    return text.translate({ord("0") + d: 0x0660 + d for d in range(10)})


def test_a_rank_prefix_in_other_digits_places_no_rank() -> None:
    # PyTorch writes `[rank9]:`; `[rank٩]:` was read as rank 9 (`\d` takes every script's digits), by the buffer
    # pass and line by line alike. Neither places it now; the ASCII line beside it is placed.
    data = "[rank\u0669]: step 1\n[rank3]: step 1\n".encode()
    in_buffers, line_by_line, _ = _both(data)
    assert in_buffers == line_by_line
    assert sorted(in_buffers.ranks) == [3]


def test_a_kernel_line_stamped_in_other_digits_is_in_no_known_format(tmp_path: Path) -> None:
    # An RFC 3339 stamp in Arabic-Indic digits was read as the instant it spells; no syslog writes one. The file
    # holding only such lines is said to be in no known format, as any other.
    line = rsyslog(T0 + timedelta(minutes=1), "gpu-1", xid(79))
    own = _ask(tmp_path / "own", ["gpu-1"], kernel={"gpu-1": [line]})
    assert [(f["target"]["name"], f["error_category"]) for f in own["attributions"]] == [("gpu-1", "gpu_off_bus")]
    stamp, rest = line.split(" ", 1)
    body = _ask(tmp_path / "other", ["gpu-1"], kernel={"gpu-1": [f"{_arabic_indic(stamp)} {rest}"]})
    assert body["attributions"] == []
    assert body["error"]["type"] == "insufficient_telemetry"

"""The signal table and the reader agree in both directions, and the file is what its header says.

Every row is reached by its example line wherever the line puts its marker; a row whose markers are taken out of the
line is not reached, and lines that hold no marker make no record at all: the reader knows no signal the table lacks.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from providers.telemetry.joblog.lines import parse_lines
from providers.telemetry.joblog.nodes import exact_resolver
from providers.telemetry.joblog.records import ExceptionKind, NodeLog
from providers.telemetry.joblog.signals import (
    ANCHORS,
    BY_ID,
    CUDA_CONTEXT,
    MARKERS,
    SIGNALS,
    STANDALONE,
    SignalMeaning,
    SignalTableError,
    anchors_for,
    markers_in,
    parse_signals,
)
from providers.telemetry.ranking import CATEGORY_RANK
from tests.joblog import fixtures as fx

TEXT = resources.files("providers.telemetry.joblog").joinpath("data", "signals.csv").read_text()
DOCS = Path(__file__).resolve().parents[2] / "docs" / "job-logs.md"
NODE = "node-a"
#: the lines that carry each parse kind's example (an exception row's example is the last line of a traceback, the
#: torchelastic row's the heading of a summary whose entry follows)
WRAP = {
    "exception": lambda ex: ["Traceback (most recent call last):", '  File "train.py", line 88, in <module>', ex],
    "elastic": lambda ex: [line if "Root Cause" not in line else ex for line in fx.UNSLOTH_4_EXIT1],
}


def _lines(row_id: str) -> list[str]:
    row = BY_ID[row_id]
    return WRAP.get(row.parse, lambda ex: [ex])(row.example)


def _parse(lines: list[str]) -> NodeLog:
    return parse_lines(NODE, lines, exact_resolver([NODE]))


def reached(log: NodeLog) -> set[str]:
    """The signal table rows a parsed log holds records of."""
    ids = {hit.signal for hit in log.signals}
    ids |= {e.kind.runtime_name if e.kind is not None else "cuda_error_unlisted" for e in log.cuda}
    ids |= {e.kind.value for e in log.network}
    ids |= {"torch_watchdog_timeout" for _ in log.timeouts}
    ids |= {"torch_watchdog_progress" for _ in log.progress}
    ids |= {"torch_desync_report" for _ in log.desync}
    ids |= {"torchelastic_root_cause" for f in log.failures if f.root}
    ids |= {"python_application_exception" for t in log.tracebacks if t.kind is ExceptionKind.APPLICATION}
    return ids


def _without(lines: list[str], markers: tuple[str, ...]) -> list[str]:
    """The lines with each of `markers` broken by a character inserted after its first one."""
    out = []
    for line in lines:
        for marker in sorted(markers, key=len, reverse=True):
            line = line.replace(marker, marker[0] + "\u00b7" + marker[1:])
        out.append(line)
    return out


@pytest.mark.parametrize("row_id", [s.id for s in SIGNALS])
def test_every_row_is_reached_by_its_example(row_id: str) -> None:
    assert row_id in reached(_parse(_lines(row_id)))


# torchelastic's summary and the desync report are printed by the launcher, with no rank prefix: not asked of them.
@pytest.mark.parametrize("row_id", [s.id for s in SIGNALS if s.parse not in ("elastic", "desync")])
def test_every_row_is_reached_behind_a_collector_and_a_rank_prefix(row_id: str) -> None:
    lines = [f"2025-06-26T06:24:44.906457629Z stderr F [rank3]:{line}" for line in _lines(row_id)]
    assert row_id in reached(_parse(lines))


@pytest.mark.parametrize("row_id", [s.id for s in SIGNALS])
def test_a_row_whose_markers_are_broken_is_not_reached(row_id: str) -> None:
    row = BY_ID[row_id]
    assert row_id not in reached(_parse(_without(_lines(row_id), row.markers)))


@pytest.mark.parametrize("row_id", [s.id for s in SIGNALS])
def test_an_example_without_any_marker_makes_no_record(row_id: str) -> None:
    log = _parse(_without(_lines(row_id), MARKERS))
    assert reached(log) == set() and log.signals == () and log.cuda == () and log.network == ()


def test_ordinary_training_lines_hold_no_marker() -> None:
    ordinary = [
        "[rank3]:[I1016 03:33:45.317536384 trainer.py:568] step 1234 loss 2.3455 lr 1e-4 grad_norm 0.13",
        "node1:12345:12345 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] via P2P/IPC/read",
        "{'loss': 0.9042, 'learning_rate': 0.00029342138051333165, 'epoch': 0.24}",
        fx.NCCL_1405_IB[1],
    ]
    assert [markers_in(line) for line in ordinary] == [()] * len(ordinary)
    assert reached(_parse(ordinary)) == set()


def test_every_marker_a_line_may_hold_by_itself_holds_an_anchor() -> None:
    assert all(any(a in m for a in ANCHORS) for m in STANDALONE)
    assert set(STANDALONE) | {m for s in SIGNALS if s.parse == "cuda" for m in s.markers} == set(MARKERS)
    assert anchors_for(["abc"]) == ("abc",)


def test_a_cuda_message_counts_only_beside_a_cuda_context_marker() -> None:
    assert markers_in("CPU out of memory") == () and markers_in("RuntimeError: unknown error") == ()
    assert "out of memory" in markers_in("NCCL WARN Cuda failure 'out of memory'")
    assert "Cuda failure " in CUDA_CONTEXT and "cudaErrorUnknown" in CUDA_CONTEXT


def test_rows_are_consistent_with_the_ranking_and_name_their_sources() -> None:
    for row in SIGNALS:
        assert row.category is None or row.category in CATEGORY_RANK
        assert row.meaning.names_node <= (row.category is not None)
        assert (row.meaning is SignalMeaning.APPLICATION) == (row.category == "application")
        assert "https://" in row.source, row.id
        assert row.says and row.never
    meanings = {row.meaning for row in SIGNALS}
    assert meanings == set(SignalMeaning)


def test_the_header_states_the_principle_and_the_columns() -> None:
    header = "\n".join(line for line in TEXT.splitlines() if line.startswith("#"))
    assert "Decision principle" in header and "corroboration" in header
    for column in ("id", "parse", "meaning", "category", "markers", "says", "never", "example", "source"):
        assert f"- {column}:" in header


def test_docs_list_every_signal_with_its_source() -> None:
    docs = DOCS.read_text()
    for row in SIGNALS:
        assert f"`{row.id}`" in docs, row.id


def test_the_file_is_checked_when_read() -> None:
    header = "id,parse,meaning,category,markers,says,never,example,source\n"
    good = "x,text,link_fabric,network,abcd,s,n,abcd,https://a\n"
    assert parse_signals(header + good)[0].id == "x"
    with pytest.raises(SignalTableError):
        parse_signals(header + good + good)  # a repeated id
    with pytest.raises(SignalTableError):
        parse_signals(header + "x,text,link_fabric,,abcd,s,n,abcd,https://a\n")  # a node row needs a category
    with pytest.raises(SignalTableError):
        parse_signals(header + "x,text,application,network,abcd,s,n,abcd,https://a\n")
    with pytest.raises(SignalTableError):
        parse_signals(header + "x,guess,link_fabric,network,abcd,s,n,abcd,https://a\n")  # an unknown parse
    with pytest.raises(SignalTableError):
        parse_signals(header + "x,text,maybe,,abcd,s,n,abcd,https://a\n")  # an unknown meaning
    with pytest.raises(SignalTableError):
        parse_signals(header + "x,text,link_fabric,no_such_category,abcd,s,n,abcd,https://a\n")
    with pytest.raises(SignalTableError):
        parse_signals(header + "x,text,link_fabric,network,ab,s,n,ab,https://a\n")  # a marker too short
    with pytest.raises(SignalTableError):
        parse_signals(header)  # empty

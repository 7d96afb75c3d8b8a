"""A node's parsed job log and what was read of it, as JSON and back (providers/telemetry/joblog/wire.py).

Both ways: every log the parser makes of the real lines of tests/joblog/fixtures.py, the incident corpus and every
searched row of the catalogues comes back equal through JSON text; and anything else is refused: each value of a
coded log replaced by one of another JSON type, a field too many or too few, an enum value, a CUDA error row or a
time the records cannot hold.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from providers.telemetry.joblog import records, wire
from providers.telemetry.joblog.files import NodeRead
from providers.telemetry.joblog.lines import parse_lines
from providers.telemetry.joblog.nodes import exact_resolver
from providers.telemetry.joblog.records import NodeLog
from providers.telemetry.joblog.rules import conclude
from tests.incidents.corpus import cases
from tests.joblog.support import fixture_groups
from tests.joblog.test_prefilter import _catalogue_lines

NODES = ["node-a", "node-b"]


def _through_json(log: NodeLog) -> NodeLog:
    return wire.node_log_from_wire(json.loads(json.dumps(wire.node_log_to_wire(log))))


def _logs() -> Iterator[NodeLog]:
    resolve = exact_resolver(NODES)
    for _, lines in fixture_groups():
        yield parse_lines("node-a", list(lines), resolve)
    groups = _catalogue_lines()
    for start in range(0, len(groups), 40):
        yield parse_lines("node-b", [line for group in groups[start : start + 40] for line in group], resolve)
    for case in cases():
        case_resolve = exact_resolver(case.nodes)
        for node, lines in case.logs.items():
            yield parse_lines(node, list(lines), case_resolve)


#: the NodeLog fields that hold records, and the record types reached through them
_RECORD_FIELDS = ("ranks", "timeouts", "progress", "desync", "failures", "network", "cuda", "tracebacks", "signals")


def test_every_parsed_log_of_real_lines_comes_back_equal_through_json() -> None:
    seen = dict.fromkeys(_RECORD_FIELDS, 0)
    fields: set[str] = set()
    filled: set[str] = set()
    count = 0
    for log in _logs():
        back = _through_json(log)
        assert back == log
        assert back.settled == log.settled and back.reported == log.reported
        count += 1
        for name in _RECORD_FIELDS:
            seen[name] += len(getattr(log, name))
        for record in (r for name in _RECORD_FIELDS[1:] for r in getattr(log, name)):
            for f in dataclasses.fields(record):
                fields.add(f"{type(record).__name__}.{f.name}")
                if getattr(record, f.name) not in (None, ()):
                    filled.add(f"{type(record).__name__}.{f.name}")
    assert count > 200
    # every kind of record was coded, every field of each filled by some line (a summary entry's traceback: below)
    assert all(seen.values()), seen
    assert fields - filled == {"ElasticFailure.traceback_exception", "ElasticFailure.traceback_kind"}


def test_a_launcher_summary_entry_with_its_traceback_comes_back_equal() -> None:
    line = records.LogLine("[0]:", None, 3)
    entry = records.ElasticFailure(True, (line,), "node-b", "node-b", 0, 0, 1, 4242, None, "2026-09-09_12:00:00",
                                   "RuntimeError: x", records.ExceptionKind.COMMUNICATION)  # fmt: skip
    log = NodeLog("node-a", 3, {}, (), (), (), (entry,), (), (), ())
    assert _through_json(log) == log


def test_the_rules_conclude_the_same_from_logs_that_came_through_json() -> None:
    compared = 0
    for case in cases():
        resolve = exact_resolver(case.nodes)
        logs = {node: parse_lines(node, list(lines), resolve) for node, lines in case.logs.items()}
        back = {node: _through_json(log) for node, log in logs.items()}
        want = conclude(case.nodes, list(case.ranks), logs, {})
        assert conclude(case.nodes, list(case.ranks), back, {}) == want, case.id
        compared += 1
    assert compared > 10


def test_a_node_read_comes_back_equal() -> None:
    read = NodeRead("node-a", ("job/0/node-a.log", "job/0/node-a.log.1"), 4096, True, ("job/0/node-a.log.2.gz",),
                    further=True, undecided=False)  # fmt: skip
    assert wire.node_read_from_wire(json.loads(json.dumps(wire.node_read_to_wire(read)))) == read


def _rich() -> NodeLog:
    """A log holding two records of each kind the real lines give, with two rank sightings."""
    taken: dict[str, list[Any]] = {name: [] for name in _RECORD_FIELDS}
    for log in _logs():
        for name in _RECORD_FIELDS:
            items = list(getattr(log, name).items() if name == "ranks" else getattr(log, name))
            taken[name] += items[: 2 - len(taken[name])]
    assert all(len(items) == 2 for items in taken.values())
    ranks = dict(taken.pop("ranks"))
    return NodeLog("node-a", 100, ranks, **{name: tuple(items) for name, items in taken.items()})


def _leaves(value: Any, path: tuple[int, ...] = ()) -> Iterator[tuple[tuple[int, ...], Any]]:
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, (*path, i))
    yield path, value


def _replaced(value: Any, path: tuple[int, ...], new: Any) -> Any:
    if not path:
        return new
    copy = list(value)
    copy[path[0]] = _replaced(value[path[0]], path[1:], new)
    return copy


def _other_type(value: Any) -> list[Any]:
    """JSON values of other types than `value`'s (a bool is not an int, an int not a float; None is left out: an
    optional field holds it)."""
    return [c for c in ("text", 7, 7.5, True, {"a": 1}, []) if type(c) is not type(value)]


def test_each_value_of_a_coded_log_replaced_by_another_type_is_refused() -> None:
    coded = wire.node_log_to_wire(_rich())
    tried = 0
    for path, value in _leaves(coded):
        if not path or value is None:  # (None is where an optional field is empty: any of its type fits there)
            continue
        for new in _other_type(value):
            with pytest.raises((ValueError, TypeError)):
                wire.node_log_from_wire(_replaced(coded, path, new))
            tried += 1
    assert tried > 500


def test_a_field_too_many_or_too_few_is_refused() -> None:
    lines, fields = wire.node_log_to_wire(_rich())
    for bad in ([lines, fields, []], [lines], [lines, [*fields, []]], [lines, fields[:-1]]):
        with pytest.raises(ValueError):
            wire.node_log_from_wire(bad)
    timeouts = fields[3]
    for record in (timeouts[0][:-1], [*timeouts[0], 1]):
        with pytest.raises(ValueError):
            wire.node_log_from_wire(_replaced([lines, fields], (1, 3, 0), record))
    for row in (lines[0][:-1], [*lines[0], 1]):
        with pytest.raises(ValueError):
            wire.node_log_from_wire(_replaced([lines, fields], (0, 0), row))
    with pytest.raises(ValueError):
        wire.node_read_from_wire(["node-a", [], 0, False, [], False])


def _with_record(field: str, record: object) -> list[Any]:
    log = NodeLog("node-a", 1, {}, (), (), (), (), (), (), ())
    return wire.node_log_to_wire(dataclasses.replace(log, **{field: (record,)}))


def test_values_the_records_cannot_hold_are_refused() -> None:
    line = records.LogLine("x", None, 1)
    traceback = records.PythonTraceback(line, 0, line, None, "RuntimeError: x", records.ExceptionKind.APPLICATION)
    coded = _with_record("tracebacks", traceback)
    assert wire.node_log_from_wire(coded).tracebacks == (traceback,)
    bad_kind = json.loads(json.dumps(coded).replace('"application"', '"nonsense"'))
    with pytest.raises(ValueError):
        wire.node_log_from_wire(bad_kind)
    cuda = records.CudaError(line, None, None, None, "an error")
    coded = _with_record("cuda", cuda)
    assert wire.node_log_from_wire(coded).cuda == (cuda,)
    with pytest.raises(ValueError):
        wire.node_log_from_wire(_replaced(coded, (1, 8, 0, 3), "cudaErrorNoSuchThing"))
    for place in (1, -1):  # the node's table holds one line
        with pytest.raises(ValueError):
            wire.node_log_from_wire(_replaced(coded, (1, 8, 0, 0), place))
    for text in ("2026-09-09T12:00:00", "not a time", "2026-13-01T00:00:00+00:00"):
        with pytest.raises(ValueError):
            wire.node_log_from_wire(_replaced(coded, (0, 0, 1), text))
    ok = wire.node_log_from_wire(_replaced(coded, (0, 0, 1), "2026-09-09T12:00:00.000001+00:00"))
    assert ok.cuda[0].line.observed_at is not None and ok.cuda[0].line.observed_at.microsecond == 1
    with pytest.raises(ValueError):  # a rank sighting's key is an int
        wire.node_log_from_wire(
            _replaced(wire.node_log_to_wire(NodeLog("n", 1, {0: records.RankSighting(line, False)}, (), (), (), (),
                                                    (), (), ())), (1, 2, 0, 0), "0")
        )  # fmt: skip


def test_a_line_two_records_hold_is_sent_once() -> None:
    at = datetime(2026, 9, 9, 12, 0, tzinfo=UTC)
    line = records.LogLine("[rank3]: the line", at, 7)
    same = records.LogLine("[rank3]: the line", at, 7)  # equal, another object
    other = records.LogLine("[rank3]: the line", at, 8)
    traceback = records.PythonTraceback(line, 3, other, None, "RuntimeError: x", records.ExceptionKind.APPLICATION)
    log = NodeLog("node-a", 9, {3: records.RankSighting(same, False)}, (), (), (), (), (), (), (traceback,))
    coded = wire.node_log_to_wire(log)
    assert len(coded[0]) == 2
    back = wire.node_log_from_wire(json.loads(json.dumps(coded)))
    assert back == log
    assert back.ranks[3].last is back.tracebacks[0].line

"""A job-wide conclusion keeps its evidence as it goes (`work.Kept`): the same items `rules._bounded` keeps from the
whole list, on seeded streams of repeated events and repeated texts. A node's context is made when it is read
(`work.Context`, `Item.later`)."""

from __future__ import annotations

import random
from functools import partial

import pytest

from providers.telemetry.joblog import conclude
from providers.telemetry.joblog.records import LogLine
from providers.telemetry.joblog.rules import _bounded
from providers.telemetry.joblog.work import Context, Item, Kept, line_evidence
from tests.joblog import fixtures as fx
from tests.joblog.support import logs
from tests.joblog.test_rules import _strip


@pytest.mark.parametrize("seed", range(12))
def test_kept_as_it_goes_equals_bounded_over_the_whole_list(seed: int) -> None:
    rng = random.Random(seed)
    limit = rng.randint(1, 32)
    stream = [
        (("timeout", rng.randrange(4)), LogLine(f"line {rng.randrange(40)}", None, n))
        for n in range(rng.randint(0, 400))
    ]
    kept = Kept(limit)
    for key, line in stream:
        kept.add(key, line)
    assert [i.evidence for i in kept.items()] == list(_bounded([Item(k, line_evidence(ln)) for k, ln in stream], limit))


def test_a_nodes_context_is_made_when_read_and_reads_as_the_bounded_items() -> None:
    made: list[str] = []

    def later(text: str) -> Item:
        return Item.later(("elastic", text), lambda: made.append(text) or line_evidence(LogLine(text, None, 1)))

    x = Item(("x",), line_evidence(LogLine("x", None, 2)))
    context = Context({"node-a": [later("a"), later("a")], "node-b": [later("b"), x]}, partial(_bounded, limit=1))
    assert "node-a" in context and "node-c" not in context and len(context) == 2
    assert list(context) == ["node-a", "node-b"]
    assert made == []  # nothing read yet
    assert [e.message for e in context["node-b"]] == ["b"] and made == ["b"]
    assert context.get("node-c") is None and made == ["b"]
    a, b = (line_evidence(LogLine(t, None, 1)) for t in "ab")
    assert context == {"node-a": (a,), "node-b": (b,)}
    assert made == ["b", "a", "a"]  # each item's evidence made once, when first read
    assert context["node-b"] is context["node-b"]
    with pytest.raises(KeyError):
        context["node-c"]


def test_a_root_cause_kept_as_context_is_shown_in_full_where_it_is_read() -> None:
    # Every rank timed out and torchelastic's summary names its rank: the summary is each node's context only.
    lines = _strip(fx.LLAMAFACTORY_7396)
    summary = [
        "Root Cause (first observed failure):", "[0]:", "  time      : 2025-03-21_02:07:09", "  host      : node-a",
        "  rank      : 0 (local_rank: 0)", "  exitcode  : -6 (pid: 4242)", "  error_file: <N/A>",
        "  traceback : Signal 6 (SIGABRT) received by PID 4242",
        "============================================================",
    ]  # fmt: skip
    out = conclude(["node-a", "node-b"], [], logs({"node-a": [lines[0], *summary], "node-b": [lines[1]]}))
    assert isinstance(out.context, Context) and list(out.context) == ["node-a"]
    (evidence,) = out.context["node-a"]
    assert evidence.message == (
        "Root Cause (first observed failure): [0]: | time : 2025-03-21_02:07:09 | host : node-a | rank : 0 "
        "(local_rank: 0) | exitcode : -6 (pid: 4242) | error_file: <N/A> | traceback : Signal 6 (SIGABRT) received by "
        "PID 4242"
    )

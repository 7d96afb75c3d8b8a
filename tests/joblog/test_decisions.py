"""The job-log rules decide by a row's meaning, whatever the row: every row of the signal table, its own example line
on a node, concluded as its meaning says (the job's causes on the job's resources, node signs on the node, node state
compared across the scope, ambiguous and consequence rows as notes). A row whose code decides (a line that prints a
CUDA error or a library's status, an NCCL network warning naming a status or an event, a family's row) is decided by
the row its example carries: the code's row, or the row whose format it matches."""

from __future__ import annotations

import itertools

import pytest

from providers.telemetry.joblog import conclude
from providers.telemetry.joblog.lines import parse_lines
from providers.telemetry.joblog.nodes import exact_resolver
from providers.telemetry.joblog.signals import BY_ID, SIGNALS, Signal, SignalMeaning
from providers.telemetry.joblog.work import PRIMARY
from tests.joblog import fixtures as fx
from tests.joblog.support import logs

#: rows read from a line (by their markers, their formats, as a CUDA error or an NCCL network warning): every one is
#: decided by its meaning alone
READ = ("text", "cuda", "nccl_net", "nccl", "nccl_result", "format")
#: a node that ran the job and reported (ArcticTraining#219: a watchdog timeout)
RAN = fx.ARCTIC_219[1]
JOB = {SignalMeaning.APPLICATION: "application", SignalMeaning.CONFIGURATION: "configuration",
       SignalMeaning.SCHEDULER: "scheduler"}  # fmt: skip


def _decider(row: Signal) -> Signal:
    """The row whose meaning decides the row's example line: the row itself, or the row the line carries (the code's
    row where the row's code decides, the row whose format a family's line matches)."""
    log = parse_lines("node-a", [row.example], exact_resolver(["node-a"]))
    signals = [h.signal for h in log.signals]
    carried = {
        # the CUDA error's code decides, or, where NVIDIA gives it no single cause, the NCCL check site it came from
        "cuda": [e.site if e.site is not None and BY_ID[e.kind.runtime_name].meaning in _UNSETTLED
                 else e.kind.runtime_name for e in log.cuda if e.kind is not None],
        "nccl_net": [e.signal or e.kind.value for e in log.network],
        **dict.fromkeys(("text", "nccl", "nccl_result", "format"), signals),
    }
    ids = [*carried[row.parse], *carried["cuda"], *carried["nccl_net"], *signals]
    return row if row.id in ids or not ids else BY_ID[ids[0]]


_UNSETTLED = (SignalMeaning.AMBIGUOUS, SignalMeaning.CONSEQUENCE)
#: each row read by its markers, with the row that decides its example
DECIDED = {s.id: _decider(s) for s in SIGNALS if s.parse in READ and s.id != "cuda_error_unlisted"}


def _rows(*meanings: SignalMeaning) -> list[Signal]:
    return [s for s in SIGNALS if s.id in DECIDED and DECIDED[s.id].meaning in meanings]


def _texts(evidence: object) -> list[str]:
    return [e.message for e in evidence]  # type: ignore[attr-defined]


@pytest.mark.parametrize("row", _rows(*JOB), ids=lambda s: s.id)
def test_the_jobs_own_cause_is_a_job_conclusion_with_its_line(row: Signal) -> None:
    out = conclude(["node-a", "node-b"], [], logs({"node-a": [row.example], "node-b": [RAN]}))
    decider = DECIDED[row.id]
    assert out.nodes == () and out.job is not None and out.job.category == JOB[decider.meaning]
    assert row.example.strip() in " ".join(_texts(out.job.evidence))
    assert decider.id in out.decided_by


@pytest.mark.parametrize("row", _rows(SignalMeaning.NODE_HARDWARE, SignalMeaning.LINK_FABRIC), ids=lambda s: s.id)
def test_a_node_sign_names_the_node_that_logged_it(row: Signal) -> None:
    out = conclude(["node-a", "node-b"], [], logs({"node-a": [row.example], "node-b": [RAN]}))
    assert [(c.node, c.category) for c in out.nodes] == [("node-a", DECIDED[row.id].category)]
    assert out.job is None


def test_the_rows_that_decided_are_listed_in_the_scopes_order_of_their_nodes() -> None:
    # One row of each own-failure category on a node of its own, the scope in every order: `decided_by` follows the
    # scope's order of the named nodes (not the order a set of node names happens to iterate in, which differs from
    # one process to another).
    deciders: dict[str, Signal] = {}
    for row in _rows(SignalMeaning.NODE_HARDWARE, SignalMeaning.LINK_FABRIC):
        if DECIDED[row.id].category in PRIMARY:
            deciders.setdefault(DECIDED[row.id].id, row)
    rows = list(deciders.values())
    nodes = [f"node-{k}" for k in range(len(rows))]
    read = logs({n: [r.example] for n, r in zip(nodes, rows, strict=True)})
    assert len(rows) >= 3
    for scope in itertools.permutations(nodes):
        out = conclude(list(scope), [], read)
        assert [c.node for c in out.nodes] == list(scope)
        assert out.decided_by == tuple(DECIDED[rows[nodes.index(n)].id].id for n in scope)


@pytest.mark.parametrize("row", _rows(SignalMeaning.NODE_STATE), ids=lambda s: s.id)
def test_node_state_names_the_node_that_shows_it_and_is_the_jobs_when_every_node_does(row: Signal) -> None:
    decider = DECIDED[row.id]
    some = conclude(["node-a", "node-b"], [], logs({"node-a": [row.example], "node-b": [RAN]}))
    assert [c.node for c in some.nodes] == ["node-a"] and some.job is None
    assert some.nodes[0].category == (decider.category or "gpu_unavailable")
    assert _texts(some.nodes[0].evidence)[0].startswith(
        f"node-a shows that it cannot run the job as it is ({decider.id})")
    every = conclude(["node-a", "node-b"], [], logs({"node-a": [row.example], "node-b": [row.example]}))
    assert every.nodes == () and every.job is not None and every.job.category == "configuration"
    assert _texts(every.job.evidence)[0].startswith("every node of the job whose log was read (2: node-a, node-b)")
    # A job of one node: a sign of the node's own stack names it; no usable device is what a job that asked for no
    # GPU sees too, so it stays the job's configuration.
    alone = conclude(["node-a"], [], logs({"node-a": [row.example]}))
    if (decider.category or "gpu_unavailable") == "gpu_unavailable":
        assert alone.nodes == () and alone.job is not None and alone.job.category == "configuration"
        assert _texts(alone.job.evidence)[0].startswith("node-a, the job's only node, found no device it could use")
    else:
        assert [(c.node, c.category) for c in alone.nodes] == [("node-a", decider.category)] and alone.job is None
        assert _texts(alone.nodes[0].evidence)[0].startswith(
            f"node-a, the job's only node, shows that its own stack cannot run the job as it is ({decider.id})")
    # The only node of a larger scope whose log was read: nothing to compare with, decided as on a job of one node.
    one_read = conclude(["node-a", "node-b"], [], logs({"node-a": [row.example]}))
    assert [(c.node, c.category) for c in one_read.nodes] == [(c.node, c.category) for c in alone.nodes]
    assert (one_read.job is None) == (alone.job is None)


@pytest.mark.parametrize("row", _rows(SignalMeaning.AMBIGUOUS, SignalMeaning.CONSEQUENCE), ids=lambda s: s.id)
def test_an_ambiguous_or_consequent_sign_is_a_note_and_names_nothing(row: Signal) -> None:
    decider = DECIDED[row.id]
    out = conclude(["node-a", "node-b"], [], logs({"node-a": [row.example], "node-b": [RAN]}))
    assert "node-a" not in {c.node for c in out.nodes}
    assert out.job is None or out.job.category == "collective_timeout"
    assert decider.id in out.noted and any(n.startswith("node-a: ") for n in out.notes)
    assert (decider.id in out.unsettled.get("node-a", ())) is (decider.meaning is SignalMeaning.AMBIGUOUS)


def test_the_jobs_causes_rank_configuration_application_scheduler_then_the_timeouts() -> None:
    config, app, sched = (_rows(m)[0] for m in (SignalMeaning.CONFIGURATION, SignalMeaning.APPLICATION,
                                                 SignalMeaning.SCHEDULER))  # fmt: skip
    lines = {"node-a": [config.example], "node-b": [app.example], "node-c": [sched.example], "node-d": [RAN]}
    assert conclude(list(lines), [], logs(lines)).job.category == "configuration"  # type: ignore[union-attr]
    del lines["node-a"]
    assert conclude(list(lines), [], logs(lines)).job.category == "application"  # type: ignore[union-attr]
    del lines["node-b"]
    assert conclude(list(lines), [], logs(lines)).job.category == "scheduler"  # type: ignore[union-attr]


def test_the_jobs_own_cause_keeps_other_nodes_symptoms_as_context() -> None:
    # Assembled: rank 0 behind rank 4 in process group 1's completed work (LlamaFactory#7396 and #6269, the group
    # named by its GUID as PyTorch 2.5 writes it) names node-a by itself; beside the job's configuration error it is
    # a symptom the configuration explains.
    behind = fx.LLAMAFACTORY_7396[2].split("] ", 1)[1].replace("[PG 1 Rank", "[PG ID 1 PG GUID 1 Rank")
    ahead = fx.LLAMAFACTORY_6269[3].replace("[PG 1 Rank", "[PG ID 1 PG GUID 1 Rank")
    alone = conclude(["node-a", "node-b"], [0, 4], logs({"node-a": [behind], "node-b": [ahead]}))
    assert [(c.node, c.category) for c in alone.nodes] == [("node-a", "collective_hang")]
    config = _rows(SignalMeaning.CONFIGURATION)[0]
    out = conclude(["node-a", "node-b"], [0, 4], logs({"node-a": [config.example, behind], "node-b": [ahead]}))
    assert out.nodes == () and out.job is not None and out.job.category == "configuration"
    assert behind in _texts(out.context["node-a"])
    assert "node-a: collective_hang kept as context only: the job's configuration failed" in out.notes

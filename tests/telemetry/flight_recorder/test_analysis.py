"""The analysis on real dumps: who the others waited for, on which node, and when no one is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.telemetry.flight_recorder.support import conclude_folder, dump_210, entry, pickled, step_job, tree, write_job


@pytest.mark.parametrize("version", ["v2.9", "v2.10"])
@pytest.mark.parametrize(
    ("scenario", "node", "rank"), [("not_reached", "node-1", 3), ("behind", "node-1", 2), ("groups", "node-2", 5)]
)
def test_the_rank_the_others_waited_for_names_its_node(
    tmp_path: Path, version: str, scenario: str, node: str, rank: int
) -> None:
    result = conclude_folder(tree(tmp_path, f"{version}/{scenario}"))
    assert set(result.node_items) == {node}
    texts = [i.message for i in result.node_items[node]]
    assert texts and all(t.startswith(f"rank {rank} ") for t in texts)
    assert {i.source for i in result.node_items[node]} == {"flight_recorder"}
    assert {i.category for i in result.node_items[node]} == {"collective_hang"}


def test_json_dumps_conclude_as_pickles(tmp_path: Path) -> None:
    result = conclude_folder(tree(tmp_path, "v2.10-json/not_reached"))
    assert list(result.node_items) == ["node-1"]


def test_version_14_names_the_rank_behind_in_sequence(tmp_path: Path) -> None:
    result = conclude_folder(tree(tmp_path, "v1.4/behind"))
    assert list(result.node_items) == ["node-1"]
    assert result.node_items["node-1"][0].message.startswith('rank 2 last completed seq 6 of group "default"')


def test_point_to_point_names_the_rank_that_never_posted_the_match(tmp_path: Path) -> None:
    result = conclude_folder(tree(tmp_path, "v1.4/p2p"))
    assert list(result.node_items) == ["node-0"]
    assert "rank 0 has no matching point-to-point operation pending; rank 1 waits in recv 1<-0" in (
        result.node_items["node-0"][0].message
    )
    # 1.4 numbers sends and receives with the collectives: that group's collectives are not compared
    assert any(
        "hold point-to-point operations, which that version numbers with the collectives" in n for n in result.notes
    )


@pytest.mark.parametrize("kind", ["mismatch_size", "mismatch_dtype", "mismatch_op"])
def test_collectives_that_differ_are_the_jobs_code(tmp_path: Path, kind: str) -> None:
    result = conclude_folder(tree(tmp_path, f"v2.10/{kind}"))
    assert not result.node_items
    assert [i.category for i in result.job_items] == ["application"]
    assert 'seq 4 of group "0" (default_pg)' in result.job_items[0].message


def test_no_one_waiting_names_no_node_and_says_so(tmp_path: Path) -> None:
    result = conclude_folder(tree(tmp_path, "v2.10/completed"))
    assert not result.node_items and not result.job_items and result.no_wait
    assert any("show no rank waiting for another" in n for n in result.notes)


def test_a_missing_dump_is_placed_by_the_job_logs_ranks(tmp_path: Path) -> None:
    # the kind NVIDIA injects as LOCK_GIL, the stopped rank's dump missing
    folder = tree(tmp_path, "v2.1/stopped")
    (folder / "node-0" / "_dump_3").unlink()
    result = conclude_folder(folder, nodes=["node-0", "node-1"])
    assert not result.node_items  # both nodes left dumps: which one rank 3 lies on is not known
    assert any("rank(s) 3, which wrote no dump and whose node neither" in n for n in result.notes)
    result = conclude_folder(folder, nodes=["node-0", "node-1"], rank_nodes={3: "node-0"})
    assert list(result.node_items) == ["node-0"]
    texts = [i.message for i in result.node_items["node-0"]]
    assert all(t.startswith("rank 3 wrote no flight-recorder dump") for t in texts)
    assert all("its node is the one whose job log holds its `[rank3]:` lines" in t for t in texts)


def test_the_one_scope_node_without_dumps_holds_the_missing_rank(tmp_path: Path) -> None:
    folder = tree(tmp_path, "v2.1/stopped")
    (folder / "node-0" / "_dump_3").unlink()
    result = conclude_folder(folder, nodes=["node-0", "node-1", "node-2"])
    assert list(result.node_items) == ["node-2"]
    assert "its node is the only scope node that left no flight-recorder dump" in result.node_items["node-2"][0].message


def test_gloo_dumps_conclude_nothing_about_a_missing_rank_whose_peers_ended(tmp_path: Path) -> None:
    folder = tree(tmp_path, "v2.10/not_reached")
    (folder / "node-1" / "nccl_trace_rank_3").unlink()
    result = conclude_folder(folder, ranks=[0, 1, 2, 3])
    assert not result.node_items


def test_a_missing_dump_in_a_group_a_named_rank_holds_back_is_not_named(tmp_path: Path) -> None:
    # the kind NVIDIA injects as GPU_ERROR on rank 6, the dump of rank 2 removed: ranks 0 and 4 wait for rank 2 and
    # rank 6 in their data-parallel collective, rank 3 for rank 2 in their tensor-parallel pair; rank 6, named, holds
    # that data-parallel group back, so rank 2 may be waiting there too: it is not named, and a note says why
    folder = tree(tmp_path, "v2.1/gpu_fault")
    (folder / "node-0" / "_dump_2").unlink()
    result = conclude_folder(folder, nodes=["node-0", "node-1"], rank_nodes={2: "node-0"})
    assert list(result.node_items) == ["node-1"]
    assert all(i.message.startswith("rank 6") for i in result.node_items["node-1"])
    assert any(
        n.startswith("rank(s) 2 wrote no flight-recorder dump and are not named, though their peers wait for them")
        and "a rank the dumps name (6)" in n
        for n in result.notes
    )


_RANK_A_NODE_PAIR = {r: f"node-{r // 2}" for r in range(8)}
_ROUND_ROBIN = {r: f"node-{r % 4}" for r in range(8)}
_NODES = ["node-0", "node-1", "node-2", "node-3"]


@pytest.mark.parametrize(("fault", "tp"), [("stopped", 2), ("stopped", 4), ("gpu", 2), ("gpu", 4)])
@pytest.mark.parametrize("removed", ["node-0", "node-1", "node-3"])
def test_a_healthy_node_without_dumps_is_never_named(tmp_path: Path, fault: str, tp: int, removed: str) -> None:
    # rank 5 (node-2) is the culprit; a healthy node's folder is not there: its ranks' peers wait for them, but those
    # ranks share a group with rank 5 or with ranks waiting behind it, so the dumps explain the wait
    dumps = {r: d for r, d in step_job(5, tp=tp, fault=fault).items() if _RANK_A_NODE_PAIR[r] != removed}
    result = conclude_folder(write_job(tmp_path / "job-1" / "0", dumps, _RANK_A_NODE_PAIR), nodes=_NODES)
    assert list(result.node_items) == ["node-2"]
    assert all(i.message.startswith("rank 5 ") for i in result.node_items["node-2"])
    if (fault, tp) == ("stopped", 2):
        gone = ", ".join(str(r) for r in range(8) if _RANK_A_NODE_PAIR[r] == removed)
        assert any(
            n.startswith(f"rank(s) {gone} wrote no flight-recorder dump and are not named") for n in result.notes
        )


@pytest.mark.parametrize(("fault", "tp"), [("stopped", 2), ("stopped", 4), ("gpu", 2), ("gpu", 4)])
def test_a_culprit_without_its_dump_is_named_when_nothing_explains_the_wait(
    tmp_path: Path, fault: str, tp: int
) -> None:
    dumps = step_job(5, tp=tp, fault=fault)
    del dumps[5]
    folder = write_job(tmp_path / "job-1" / "0", dumps, _RANK_A_NODE_PAIR)
    result = conclude_folder(folder, nodes=_NODES, rank_nodes={5: "node-2"})
    assert list(result.node_items) == ["node-2"]
    texts = [i.message for i in result.node_items["node-2"]]
    assert texts and all(t.startswith("rank 5 wrote no flight-recorder dump; ") for t in texts)
    assert all("its node is the one whose job log holds its `[rank5]:` lines" in t for t in texts)


def test_a_culprits_node_without_dumps_is_named_when_nothing_explains_the_wait(tmp_path: Path) -> None:
    # the culprit's whole node left no dump: its two ranks are placed on the one scope node without dumps
    dumps = {r: d for r, d in step_job(5).items() if _RANK_A_NODE_PAIR[r] != "node-2"}
    result = conclude_folder(write_job(tmp_path / "job-1" / "0", dumps, _RANK_A_NODE_PAIR), nodes=_NODES)
    assert list(result.node_items) == ["node-2"]
    texts = [i.message for i in result.node_items["node-2"]]
    assert {t.split(" ", 2)[1] for t in texts} == {"4", "5"}
    assert all("its node is the only scope node that left no flight-recorder dump" in t for t in texts)


def test_a_rank_waiting_in_a_collective_for_a_rank_without_a_dump_is_not_named(tmp_path: Path) -> None:
    # two ranks a node, round robin: the culprit (5, node-1) left no dump; its tensor-parallel peer (4, node-0) waits
    # for it, and its data-parallel peers wait for rank 4: rank 4 may be stuck behind rank 5, and is not named
    dumps = step_job(5)
    del dumps[5]
    folder = write_job(tmp_path / "job-1" / "0", dumps, _ROUND_ROBIN)
    result = conclude_folder(folder, nodes=_NODES, rank_nodes={5: "node-1"})
    assert list(result.node_items) == ["node-1"]
    assert all(i.message.startswith("rank 5 wrote no flight-recorder dump") for i in result.node_items["node-1"])
    assert any(
        n.startswith("rank(s) 4, which their peers wait for, are not named: they wait themselves")
        for n in (result.notes)
    )


def test_ranks_without_dumps_sharing_a_group_on_two_nodes_are_not_named(tmp_path: Path) -> None:
    # the culprit (5) and a healthy rank (2) left no dump, on two nodes: either may be waiting behind the other
    dumps = step_job(5)
    del dumps[5], dumps[2]
    folder = write_job(tmp_path / "job-1" / "0", dumps, _RANK_A_NODE_PAIR)
    result = conclude_folder(folder, nodes=_NODES, rank_nodes={5: "node-2", 2: "node-1"})
    assert not result.node_items
    assert any(
        "waiting for rank(s) 2, 5, which wrote no dump and share a group with other such ranks not on their node" in n
        for n in result.notes
    )


def test_a_rank_behind_at_a_collective_its_peers_finished_waits_there_for_no_missing_member(tmp_path: Path) -> None:
    # the culprit (5) never saw its all_gather complete; its peers finished it (so every member, rank 6 too, took
    # part) and wait in the next one: rank 6's dump missing does not make rank 5 a waiter, and rank 6 is not named
    dumps = step_job(5, tp=4, fault="gpu")
    del dumps[6]
    folder = write_job(tmp_path / "job-1" / "0", dumps, _RANK_A_NODE_PAIR)
    result = conclude_folder(folder, nodes=_NODES, rank_nodes={6: "node-3"})
    assert list(result.node_items) == ["node-2"]
    assert all(i.message.startswith("rank 5 ") for i in result.node_items["node-2"])


def test_gloo_dumps_conclude_nothing_about_a_missing_rank(tmp_path: Path) -> None:
    # gloo records no completion: its ranks' collectives all ended, and the one rank without a dump is not named
    folder = tree(tmp_path, "v2.10/completed")
    (folder / "node-1" / "nccl_trace_rank_3").unlink()
    result = conclude_folder(folder, ranks=[0, 1, 2, 3])
    assert not result.node_items


@pytest.mark.parametrize(
    ("scenario", "node", "rank"), [("gpu_fault", "node-1", 6), ("full", "node-1", 6), ("stopped", "node-0", 3)]
)
@pytest.mark.parametrize("version", ["v2.1", "v2.4"])
def test_nccl_dumps_name_the_faulty_rank(tmp_path: Path, version: str, scenario: str, node: str, rank: int) -> None:
    result = conclude_folder(tree(tmp_path, f"{version}/{scenario}"))
    assert set(result.node_items) == {node}
    assert all(i.message.startswith(f"rank {rank}") for i in result.node_items[node])


def test_json_dumps_of_nccl_conclude_as_their_pickles(tmp_path: Path) -> None:
    # 2.5's JSON writer: pg_status numbers as text, 0 for a time not discovered
    result = conclude_folder(tree(tmp_path, "v2.4-json/stopped"))
    assert list(result.node_items) == ["node-0"]
    assert all(i.message.startswith("rank 3") for i in result.node_items["node-0"])


def test_dumps_beside_the_node_folders_are_named_in_a_note_and_not_read(tmp_path: Path) -> None:
    folder = tree(tmp_path, "v2.10/completed")
    (folder / "node-0" / "nccl_trace_rank_0").rename(folder / "nccl_trace_rank_0")
    result = conclude_folder(folder, ranks=[0, 1, 2, 3])
    assert not result.node_items
    assert any(n.startswith("1 file(s) named like dumps lie in job-1/0/ itself") for n in result.notes)


def test_a_rank_waiting_for_a_missing_rank_does_not_explain_its_absence(tmp_path: Path) -> None:
    # rank 0 waits in group "a" (ranks 0, 1) for rank 1, whose dump is missing, and in group "b" (0, 2) for rank 2,
    # which stopped (named): rank 0 is held back by rank 2, but rank 1 cannot be waiting for rank 0 in "a", where rank
    # 0 waits for it; rank 1 shares no group with rank 2 (these tables list no default group), so it is named too
    def one(group: str, seq: int, state: str = "completed") -> dict[str, object]:
        return entry(group, seq, state, desc=group.upper(), created=1_790_000_000_000_000_000 + 10**9 * seq)

    def dump(groups: dict[str, list[int]], rows: list[dict[str, object]]) -> bytes:
        data = dump_210(rows)
        data["pg_config"] = {g: {"name": g, "desc": g.upper(), "ranks": str(r)} for g, r in groups.items()}
        return pickled(data)

    dumps = {
        0: dump({"a": [0, 1], "b": [0, 2]}, [one("a", 1), one("b", 1), one("b", 2), one("a", 2, "scheduled"),
                                              one("b", 3, "scheduled")]),
        2: dump({"b": [0, 2], "c": [2, 3]}, [one("b", 1), one("c", 1), one("b", 2)]),
        3: dump({"c": [2, 3]}, [one("c", 1), one("c", 2, "scheduled")]),
    }  # fmt: skip
    folder = write_job(tmp_path / "job-1" / "0", dumps, {r: f"node-{r}" for r in range(4)})
    result = conclude_folder(folder, nodes=[f"node-{r}" for r in range(4)])
    assert sorted(result.node_items) == ["node-1", "node-2"]
    assert all(i.message.startswith("rank 1 wrote no flight-recorder dump") for i in result.node_items["node-1"])
    assert all(i.message.startswith("rank 2 ") for i in result.node_items["node-2"])

"""The analysis on real dumps: who the others waited for, on which node, and when no one is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.telemetry.flight_recorder.support import conclude_folder, tree


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


def test_a_missing_dump_its_peers_wait_for_in_a_collective_is_named(tmp_path: Path) -> None:
    # the kind NVIDIA injects as GPU_ERROR on rank 6, the dump of rank 2 removed: rank 6 waits in a recv from rank 2
    # (a point-to-point wait: it does not make rank 6 a waiter, nor name rank 2), ranks 0 and 4 wait for rank 2 (and
    # rank 6) in their data-parallel collective, rank 3 for rank 2 in their tensor-parallel pair: rank 2 is named
    # too, as the rules say (the dumps cannot tell a rank whose dump was lost from one stuck without writing it)
    folder = tree(tmp_path, "v2.1/gpu_fault")
    (folder / "node-0" / "_dump_2").unlink()
    result = conclude_folder(folder, nodes=["node-0", "node-1"], rank_nodes={2: "node-0"})
    assert sorted(result.node_items) == ["node-0", "node-1"]
    assert all(i.message.startswith("rank 6") for i in result.node_items["node-1"])
    texts = [i.message for i in result.node_items["node-0"]]
    assert all(t.startswith("rank 2 wrote no flight-recorder dump") for t in texts)
    assert not any("recv" in t for t in texts)


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

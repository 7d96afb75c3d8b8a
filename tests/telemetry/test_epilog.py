"""`slow`: epilog DCGM diagnostic results (4.x and 3.x JSON) per node inside the epilog window."""

import json
import os
from pathlib import Path

import pytest

from providers.base import ErrorType, NodeTarget, Phase
from providers.telemetry.dcgm.results import failure_category, parse_diag
from tests.telemetry.conftest import at, deadline, make_request

START, END = at(-240), at(30)


def diag4(*tests: tuple[str, str, str, list[str]], runtime_error: str | None = None) -> dict:
    """A DCGM 4.x `dcgmi diag -j` document; tests as (category, name, status, warnings)."""
    body: dict = {"test_categories": []}
    for category, name, status, warnings in tests:
        body["test_categories"].append(
            {
                "category": category,
                "tests": [
                    {
                        "name": name,
                        "results": [
                            {
                                "entity_group": "GPU",
                                "entity_group_id": 1,
                                "entity_id": 2,
                                "status": status,
                                "warnings": [{"warning": w, "error_id": 79, "error_category": 4} for w in warnings],
                            }
                        ],
                        "test_summary": {"status": status},
                    }
                ],
            }
        )
    if runtime_error:
        body = {"runtime_error": runtime_error}
    return {"DCGM Diagnostic": body, "metadata": {"version": "4.2.3"}}


def diag3(name: str, status: str, warnings: list[str] | None = None) -> dict:
    result: dict = {"gpu_id": "0", "status": status, "info": "bandwidth 25 GB/s"}
    if warnings:
        result["warnings"] = [{"warning": w, "error_id": 3} for w in warnings]
    return {
        "DCGM GPU Diagnostic": {
            "test_categories": [{"category": "Integration", "tests": [{"name": name, "results": [result]}]}]
        },
        "version": "3.3.7",
    }


def put(root: Path, rel: str, doc: object) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def slow(files_provider, tmp_path: Path, nodes: list[str]):
    provider = files_provider(ATTRIBUTION_EPILOG_DIR=str(tmp_path / "epilog"))
    return provider.slow(make_request(nodes, start=START, end=END, phase=Phase.SLOW), {"v": 1}, deadline(), None)


def test_failed_memory_test_is_a_finding_passing_node_unattributed(files_provider, tmp_path: Path) -> None:
    e = tmp_path / "epilog"
    put(
        e,
        "worker-01-20260909T121000Z.json",
        diag4(("Hardware", "memory", "Fail", ["DBE on GPU 2"]), ("Deployment", "software", "Pass", [])),
    )
    put(e, "worker-02/20260909T121100Z.json", diag3("PCIe", "Pass"))
    outcome = slow(files_provider, tmp_path, ["worker-01", "worker-02"])
    (finding,) = outcome.attributions
    assert finding.target == NodeTarget("worker-01") and finding.error_category == "gpu_memory"
    assert finding.observed_at == at(10)
    assert [(ev.source, ev.message) for ev in finding.evidence] == [("dcgm", "memory: DBE on GPU 2")]
    assert finding.confidence is None
    assert outcome.unattributed_targets == (NodeTarget("worker-02"),)
    assert outcome.error is None


def test_dcgm3_failed_pcie_test(files_provider, tmp_path: Path) -> None:
    put(tmp_path / "epilog", "worker-01.json", diag3("PCIe", "Fail", ["PCIe replay count 4000 exceeds limit"]))
    os.utime(tmp_path / "epilog" / "worker-01.json", (at(5).timestamp(), at(5).timestamp()))  # no time in the name
    outcome = slow(files_provider, tmp_path, ["worker-01"])
    assert outcome.attributions[0].error_category == "pcie"
    assert outcome.attributions[0].observed_at == at(5)


def test_runtime_error_malformed_and_out_of_window_count_as_missing(files_provider, tmp_path: Path) -> None:
    e = tmp_path / "epilog"
    put(e, "worker-01-20260909T121000Z.json", diag4(runtime_error="Unable to connect to the host engine"))
    put(e, "worker-02-20260909T121000Z.json", '{"DCGM Diagnostic": {"test_categories": [')  # cut short
    put(e, "worker-03-2026-09-08T12-10-00Z.json", diag4(("Hardware", "memory", "Fail", ["old"])))  # a day early
    put(e, "worker-04-20260909T121000Z.json", diag4(("Integration", "pcie", "Pass", [])))
    outcome = slow(files_provider, tmp_path, ["worker-01", "worker-02", "worker-03", "worker-04"])
    assert outcome.attributions == ()
    assert outcome.unattributed_targets == (NodeTarget("worker-04"),)
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY
    assert outcome.error.message.startswith("no epilog health-check results for 3 of 4 nodes in the window")


def test_no_results_at_all(files_provider, tmp_path: Path) -> None:
    (tmp_path / "epilog").mkdir()
    outcome = slow(files_provider, tmp_path, ["worker-01"])
    assert outcome.attributions == () and outcome.unattributed_targets == ()
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY


def test_not_configured(files_provider) -> None:
    outcome = files_provider().slow(
        make_request(["worker-01"], start=START, end=END, phase=Phase.SLOW), {}, deadline(), None
    )
    assert outcome.attributions == () and outcome.unattributed_targets == ()
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY
    assert outcome.error.message == "epilog health-check logs are not configured"


def test_longest_node_name_wins_and_other_nodes_are_ignored(files_provider, tmp_path: Path) -> None:
    e = tmp_path / "epilog"
    put(e, "gpu-1-2-20260909T121000Z.json", diag4(("Hardware", "memory", "Fail", ["x"])))
    put(e, "gpu-9-20260909T121000Z.json", diag4(("Hardware", "memory", "Fail", ["y"])))
    outcome = slow(files_provider, tmp_path, ["gpu-1", "gpu-1-2"])
    assert [f.target for f in outcome.attributions] == [NodeTarget("gpu-1-2")]


def test_categories_from_test_names() -> None:
    assert failure_category("memory", "Hardware") == "gpu_memory"
    assert failure_category("GPU Memory", "Hardware") == "gpu_memory"
    assert failure_category("memory_bandwidth", "Stress") == "gpu_memory"
    assert failure_category("pcie", "Integration") == "pcie"
    assert failure_category("nvbandwidth", "Integration") == "nvlink"
    assert failure_category("software", "Deployment") == "gpu_driver"
    assert failure_category("targeted_stress", "Stress") == "gpu_hardware"


def test_parse_diag_shapes() -> None:
    assert parse_diag(diag4(("Stress", "diagnostic", "Skip", [])))[0] == "empty"
    assert parse_diag(diag4(runtime_error="boom")) == ("runtime_error", [])
    status, failures = parse_diag(diag4(("Stress", "targeted_power", "Fail", ["a", "b"])))
    assert status == "fail" and [f.message for f in failures] == ["a", "b"]
    for bad in ([], {"other": 1}, {"DCGM Diagnostic": {"test_categories": "x"}}):
        try:
            parse_diag(bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad!r}")


# ---------------------------------------------------------------- `dcgmi` output as written (fixtures/SOURCES.md)

FIXTURES = Path(__file__).parent / "fixtures"


def place(tmp_path: Path, fixture: str, name: str) -> None:
    target = tmp_path / "epilog" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes((FIXTURES / fixture).read_bytes())


def test_dcgm_results_as_dcgmi_writes_them(files_provider, tmp_path: Path, caplog) -> None:
    place(tmp_path, "dcgm3-nulls-text-before.txt", "worker-01-20260909T121000Z.json")
    place(tmp_path, "dcgm4-two-gpus-text-after.txt", "worker-02/20260909T121000Z.json")
    place(tmp_path, "dcgm3-iterations-warnings-key.json", "worker-03-2026-09-09T12:10:00Z.json")
    place(tmp_path, "dcgm3-skip-only.json", "worker-04-2026-09-09T12-10-00Z.json")
    place(tmp_path, "dcgm2-runtime-error.json", "worker-05-20260909T121000Z.json")
    nodes = ["worker-01", "worker-02", "worker-03", "worker-04", "worker-05"]
    with caplog.at_level("WARNING", logger="attribution_adapter.telemetry"):
        outcome = slow(files_provider, tmp_path, nodes)
    found = {f.target.name: f for f in outcome.attributions}
    assert sorted(found) == ["worker-01", "worker-02", "worker-03"]
    assert all(f.error_category == "gpu_memory" for f in found.values())
    assert [e.message for e in found["worker-01"].evidence] == [
        "GPU Memory: A memory mismatch was detected on GPU 1, but no error was reported by CUDA or NVML."
    ]
    assert len(found["worker-02"].evidence) == 2  # both GPUs of the file
    assert "row remapping failed" in found["worker-03"].evidence[0].message
    assert outcome.unattributed_targets == ()
    assert outcome.error is not None and outcome.error.message.startswith("no epilog health-check results for 2 of 5")
    assert not caplog.records  # every file was readable


def test_an_unreadable_result_makes_only_its_node_uncertain(files_provider, tmp_path: Path, caplog) -> None:
    e = tmp_path / "epilog"
    put(e, "worker-01-20260909T121000Z.json", diag4(("Hardware", "memory", "Pass", [])))
    put(e, "worker-01-20260909T121100Z.json", "Error: unable to reach the host engine\n")
    put(e, "worker-02-20260909T121000Z.json", diag4(("Hardware", "memory", "Fail", ["DBE"])))
    put(e, "worker-03-20260909T121000Z.json", diag4(("Hardware", "memory", "Pass", [])))
    with caplog.at_level("WARNING", logger="attribution_adapter.telemetry"):
        outcome = slow(files_provider, tmp_path, ["worker-01", "worker-02", "worker-03"])
    assert [f.target for f in outcome.attributions] == [NodeTarget("worker-02")]
    assert outcome.unattributed_targets == (NodeTarget("worker-03"),)  # worker-01 was not seen to be fine
    assert outcome.error is not None and outcome.error.type is ErrorType.INSUFFICIENT_TELEMETRY
    assert any("worker-01-20260909T121100Z.json" in r.getMessage() for r in caplog.records)
    assert all("host engine" not in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "name",
    ["worker-01-20260909T121000Z.json", "worker-01.json", "worker-01-2026-09-09T12:10:00Z.json", "WORKER-01.json"],
)
def test_epilog_files_match_a_node_only_by_its_whole_name(files_provider, tmp_path: Path, name: str) -> None:
    put(tmp_path / "epilog", name, diag4(("Hardware", "memory", "Fail", ["DBE"])))
    os.utime(tmp_path / "epilog" / name, (at(5).timestamp(), at(5).timestamp()))
    outcome = slow(files_provider, tmp_path, ["worker", "worker-01", "worker-0"])
    assert [f.target for f in outcome.attributions] == [NodeTarget("worker-01")]


@pytest.mark.parametrize("name", ["worker-01-old.json", "worker-01-20260909T121000Z-rerun.json", "worker-01x.json"])
def test_epilog_suffixes_other_than_a_stamp_match_no_node(files_provider, tmp_path: Path, name: str) -> None:
    put(tmp_path / "epilog", name, diag4(("Hardware", "memory", "Fail", ["DBE"])))
    os.utime(tmp_path / "epilog" / name, (at(5).timestamp(), at(5).timestamp()))
    outcome = slow(files_provider, tmp_path, ["worker-01", "worker"])
    assert outcome.attributions == ()

"""`slow`: epilog DCGM diagnostic results (4.x and 3.x JSON) per node inside the epilog window."""

import json
import os
from pathlib import Path

from providers.base import ErrorType, NodeTarget, Phase
from providers.kernel_log.epilog import failure_category, parse_diag
from tests.kernel_log.conftest import at, deadline, make_request

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

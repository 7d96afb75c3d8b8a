"""From files on disk to conclusions, the way the provider will call the sub-package."""

from collections.abc import Sequence
from pathlib import Path

from providers.telemetry.joblog import (
    JobLogScan,
    NodeResolver,
    OomKill,
    conclude,
    exact_resolver,
    oom_killed_pid,
    scan_job_logs,
)
from tests.joblog import fixtures as fx
from tests.joblog.support import cri, deadline, later, write_tree


def _scan(root: Path, nodes: Sequence[str], **kwargs: object) -> JobLogScan:
    return scan_job_logs(root, "job-1", 0, nodes, deadline(), **kwargs)  # type: ignore[arg-type]


def test_a_hang_on_one_node_of_a_collector_tree(tmp_path: Path) -> None:
    # Assembled from ArcticTraining#219 and BasicSR#737, as a CRI collector writes them: ranks 0-2 time out on
    # worker-01 at the same work; rank 7 on worker-02 only reports its watchdog stuck.
    write_tree(tmp_path, {
        "worker-01.log": [cri(line, at=later(i)) for i, line in enumerate(fx.BASICSR_737)],
        "worker-02.log": [cri(fx.ARCTIC_219[0], at=later(-30))],
        "worker-03.log": [cri("[rank9]: step 1580 loss 2.01")],
    })
    nodes = ["worker-01", "worker-02", "worker-03", "worker-04"]
    scan = _scan(tmp_path, nodes)
    assert set(scan.logs) == {"worker-01", "worker-02", "worker-03"} and scan.read.without_files == ("worker-04",)
    out = conclude(nodes, [0, 1, 2, 7], scan.logs)
    (finding,) = out.nodes
    assert (finding.node, finding.category, finding.observed_at) == ("worker-02", "collective_hang", later(-30))
    assert out.job is None


def test_an_oom_kill_on_one_node(tmp_path: Path) -> None:
    node = fx.CPPO_6_HOST
    write_tree(tmp_path, {f"{node}.log": [cri(line, at=later(2)) for line in fx.CPPO_6_SIGKILL]})
    scan = _scan(tmp_path, [node, "healthy"])
    pid = oom_killed_pid(fx.ERT_7797_OOM)
    assert pid is not None
    out = conclude([node, "healthy"], [0], scan.logs, {node: [OomKill(pid, later(-10), fx.ERT_7797_OOM)]})
    assert [(f.node, f.category) for f in out.nodes] == [(node, "host_oom")]


def test_node_identity_is_the_resolvers_to_decide(tmp_path: Path) -> None:
    write_tree(tmp_path, {"worker-01.cluster.local.log": fx.JADE_194_ECC})
    assert _scan(tmp_path, ["worker-01"]).logs == {}  # whole names only, by default

    def short_or_fqdn(nodes: Sequence[str]) -> NodeResolver:
        exact = exact_resolver(nodes)
        return lambda name: exact(name) or exact(name.split(".", 1)[0])

    scan = _scan(tmp_path, ["worker-01"], resolver_factory=short_or_fqdn)
    out = conclude(["worker-01"], [], scan.logs)
    assert [(f.node, f.category) for f in out.nodes] == [("worker-01", "gpu_memory")]

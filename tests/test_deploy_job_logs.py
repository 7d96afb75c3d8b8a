"""The optional job-log component of the telemetry-files overlay: a second read-only volume, ATTRIBUTION_JOB_LOG_DIR
set on it, rendered by the same real kustomize as tests/test_deploy_manifests.py, and accepted by the provider."""

from __future__ import annotations

import os
from pathlib import Path

from app.settings import Settings
from providers import load_provider
from tests.test_deploy_manifests import KUSTOMIZE_DIR, SAMPLES, _container, _environment, _objects, _pod_spec

OVERLAY = KUSTOMIZE_DIR / "overlays" / "telemetry-files"


def test_the_job_log_component_mounts_a_second_read_only_volume_and_sets_the_directory(tmp_path: Path) -> None:
    here = Path(os.path.relpath(OVERLAY, tmp_path))
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n  - {here}\ncomponents:\n  - {here / 'job-logs'}\n"
    )
    docs = _objects(tmp_path)
    env = _environment(docs)
    mounts = {m["mountPath"]: m for m in _container(docs)["volumeMounts"]}
    job_dir = env["ATTRIBUTION_JOB_LOG_DIR"]
    mount = mounts[job_dir]
    assert mount["readOnly"] is True
    volume = {v["name"]: v for v in _pod_spec(docs)["volumes"]}[mount["name"]]
    claim = volume["persistentVolumeClaim"]
    assert claim["readOnly"] is True
    claims = {d["metadata"]["name"]: d for d in docs if d["kind"] == "PersistentVolumeClaim"}
    assert claims[claim["claimName"]]["spec"]["accessModes"] == ["ReadOnlyMany"]
    assert len(claims) == 2  # beside the kernel-log telemetry claim
    # The kernel-log settings are still there; with the samples in place the provider builds as at boot.
    options = {**env, "ATTRIBUTION_KERNEL_LOG_DIR": str(SAMPLES / "kernel-logs"),
               "ATTRIBUTION_EPILOG_DIR": str(SAMPLES / "epilog"), "ATTRIBUTION_JOB_LOG_DIR": str(SAMPLES / "job-logs")}
    provider = load_provider(options["ATTRIBUTION_PROVIDER"], Settings.from_env(options).options)
    assert provider.settings.job_logs is not None  # type: ignore[attr-defined]


def test_the_overlay_alone_sets_no_job_log_directory() -> None:
    assert "ATTRIBUTION_JOB_LOG_DIR" not in _environment(_objects(OVERLAY))

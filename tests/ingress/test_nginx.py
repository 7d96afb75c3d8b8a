"""The plain nginx example of docs/deploy.md, run as documented in front of a real Adapter: real nginx (Debian's
package; .ci/run installs it) on 127.0.0.1 with its own prefix, a CA, server and client certificates made here by
the openssl command, and gunicorn with the project's config serving the sample logs. Both are stopped by PID.

The same block also runs with the ingress-nginx example's body settings (its annotations, as the nginx directives
they name) in place of its own, so that both documented ingresses are held to the contract.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
import yaml

from app.openapi import SEED_EXAMPLE
from tests.gunicorn_process import ROOT, Gunicorn, free_port

DEPLOY_DOC = ROOT / "docs" / "deploy.md"
START_TIMEOUT_S = 20.0
IO_TIMEOUT_S = 60.0
ADAPTER_LIMIT = 4 * 1024 * 1024
SAMPLES = {
    "ATTRIBUTION_PROVIDER": "telemetry",
    "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
    "ATTRIBUTION_KERNEL_LOG_DIR": "conf/samples/kernel-logs",
    "ATTRIBUTION_EPILOG_DIR": "conf/samples/epilog",
    "ATTRIBUTION_JOB_LOG_DIR": "conf/samples/job-logs",
    "ATTRIBUTION_WORKERS": "1",
    "ATTRIBUTION_THREADS": "4",
}
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
# The documented block's placeholders and what they become here; each must occur exactly once.
LISTEN = "listen 10.0.0.10:443 ssl;"
UPSTREAM = "server attribution-adapter.attribution.svc.cluster.local:8000;"
CERT_DIR = "/etc/nginx/attribution/"
BODY_LIMIT = "client_max_body_size    8m;"


def documented_blocks(language: str) -> list[str]:
    """The fenced blocks of `language` in docs/deploy.md."""
    return re.findall(rf"```{language}\n(.*?)```", DEPLOY_DOC.read_text(), flags=re.DOTALL)


def nginx_example() -> str:
    (block,) = documented_blocks("nginx")
    return block


def ingress_body_settings() -> str:
    """The ingress-nginx example's body annotations as the nginx directives they set."""
    (ingress,) = [block for block in documented_blocks("yaml") if "kind: Ingress" in block]
    annotations = yaml.safe_load(ingress)["metadata"]["annotations"]
    prefix = "nginx.ingress.kubernetes.io/"
    buffering = annotations.get(prefix + "proxy-request-buffering", "on")
    return f"client_max_body_size {annotations[prefix + 'proxy-body-size']}; proxy_request_buffering {buffering};"


def replace_once(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"the documented nginx block no longer holds {old!r} once"
    return text.replace(old, new)


# ---------------------------------------------------------------- certificates


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_ca(directory: Path, name: str) -> None:
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
            "-keyout", f"{name}.key", "-out", f"{name}.crt", cwd=directory)  # fmt: skip


def make_signed(directory: Path, name: str, ca: str, extensions: str) -> None:
    (directory / f"{name}.ext").write_text(extensions + "\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
            "-out", f"{name}.csr", cwd=directory)  # fmt: skip
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
            "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=directory)  # fmt: skip


@dataclass
class Certificates:
    directory: Path

    def path(self, name: str) -> str:
        return str(self.directory / name)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    if shutil.which("openssl") is None:
        pytest.fail("the openssl command is not installed (Debian: apt-get install openssl; .ci/run installs it)")
    directory = tmp_path_factory.mktemp("pki")
    make_ca(directory, "client-ca")
    make_ca(directory, "server-ca")
    make_ca(directory, "other-ca")
    make_signed(directory, "server", "server-ca", "subjectAltName=DNS:attribution.internal.example,IP:127.0.0.1")
    make_signed(directory, "adi", "client-ca", "extendedKeyUsage=clientAuth")
    make_signed(directory, "stranger", "other-ca", "extendedKeyUsage=clientAuth")
    return Certificates(directory)


# ---------------------------------------------------------------- servers


@pytest.fixture(scope="module")
def adapter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gunicorn]:
    server = Gunicorn(SAMPLES, tmp_path_factory.mktemp("adapter") / "gunicorn.log")
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


class Nginx:
    """nginx with its own prefix, pid file, logs and temporary directories under `prefix`, on a free port."""

    def __init__(self, block: str, prefix: Path, port: int) -> None:
        self.port = port
        self.prefix = prefix
        for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi", "logs"):
            (prefix / name).mkdir(parents=True, exist_ok=True)
        # As root, nginx's workers would run as `nobody`, who cannot enter this private temporary directory.
        user = "user root;\n" if os.geteuid() == 0 else ""
        (prefix / "nginx.conf").write_text(
            f"{user}daemon off;\nmaster_process on;\nworker_processes 1;\npid {prefix}/nginx.pid;\n"
            f"error_log {prefix}/logs/error.log warn;\nevents {{ worker_connections 64; }}\n"
            f"http {{\n  access_log off;\n  client_body_temp_path {prefix}/client_body;\n"
            f"  proxy_temp_path {prefix}/proxy;\n  fastcgi_temp_path {prefix}/fastcgi;\n"
            f"  uwsgi_temp_path {prefix}/uwsgi;\n  scgi_temp_path {prefix}/scgi;\n{block}\n}}\n"
        )
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        if not Path(nginx).exists():
            pytest.fail("nginx is not installed (Debian: apt-get install nginx; .ci/run installs it)")
        check = subprocess.run(
            [nginx, "-t", "-p", f"{prefix}/", "-c", str(prefix / "nginx.conf"), "-e", str(prefix / "logs/error.log")],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert check.returncode == 0, check.stderr
        self.process = subprocess.Popen(
            [nginx, "-p", f"{prefix}/", "-c", str(prefix / "nginx.conf"), "-e", str(prefix / "logs/error.log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"nginx exited {self.process.returncode}: {self.errors()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"nginx did not listen within {START_TIMEOUT_S} s: {self.errors()}")

    def errors(self) -> str:
        log = self.prefix / "logs" / "error.log"
        return log.read_text(errors="replace") if log.exists() else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGQUIT)  # graceful shutdown of the master and its worker
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


def rendered(block: str, nginx_port: int, adapter_port: int, certs: Certificates) -> str:
    block = replace_once(block, LISTEN, f"listen 127.0.0.1:{nginx_port} ssl;")
    block = replace_once(block, UPSTREAM, f"server 127.0.0.1:{adapter_port};")
    assert block.count(CERT_DIR) == 3, "the documented block names three certificate files"
    return block.replace(CERT_DIR, f"{certs.directory}/")


@pytest.fixture(scope="module", params=["documented", "ingress-nginx body settings"])
def ingress(request, adapter, certificates, tmp_path_factory) -> Iterator[Nginx]:
    block = nginx_example()
    if request.param != "documented":
        block = replace_once(block, BODY_LIMIT, ingress_body_settings())
    port = free_port()
    server = Nginx(rendered(block, port, adapter.port, certificates), tmp_path_factory.mktemp("nginx"), port)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


# ---------------------------------------------------------------- callers


def call(ingress: Nginx, certs: Certificates, body: bytes, client: str | None = "adi", **headers: str):
    return requests.post(
        f"https://127.0.0.1:{ingress.port}/v1/attribution",
        data=body,
        headers={"Content-Type": "application/json", **headers},
        verify=certs.path("server-ca.crt"),
        cert=None if client is None else (certs.path(f"{client}.crt"), certs.path(f"{client}.key")),
        timeout=IO_TIMEOUT_S,
    )


def request_lines(adapter: Gunicorn) -> list[dict]:
    """The Adapter's request log lines (JSON), in order."""
    lines = []
    for line in adapter.output().splitlines():
        if line.startswith("{") and '"message":"request"' in line.replace(" ", ""):
            lines.append(json.loads(line))
    return lines


def assert_json_413(answer: requests.Response) -> None:
    assert answer.status_code == 413, (answer.status_code, answer.text[:300])
    assert answer.headers["Content-Type"].startswith("application/json")
    assert answer.json() == {"detail": "Request body is larger than the configured limit"}
    assert re.fullmatch(r"[0-9a-f]{32}", answer.headers["X-Request-ID"])


SEED_BODY = json.dumps(SEED_EXAMPLE).encode()


@pytest.mark.parametrize("client", [None, "stranger"], ids=["no certificate", "another CA's certificate"])
def test_a_caller_without_a_certificate_of_the_callers_ca_is_refused(ingress, certificates, adapter, client):
    before = len(request_lines(adapter))
    answer = call(ingress, certificates, SEED_BODY, client=client)
    assert answer.status_code == 400 and "certificate" in answer.text.lower(), answer.text[:300]
    assert len(request_lines(adapter)) == before  # it never reached the Adapter


def test_the_readme_request_is_answered_through_the_ingress_with_its_trace_context(ingress, certificates, adapter):
    answer = call(ingress, certificates, SEED_BODY, traceparent=TRACEPARENT)
    assert answer.status_code == 200, answer.text[:300]
    assert [a["target"]["name"] for a in answer.json()["attributions"]] == ["worker-01"]
    request_id = answer.headers["X-Request-ID"]
    (line,) = [line for line in request_lines(adapter) if line.get("request_id") == request_id]
    assert line["trace_id"] == TRACE_ID and line["status"] == 200


@pytest.mark.parametrize("size", [ADAPTER_LIMIT + 1, 2 * ADAPTER_LIMIT + 1024], ids=["over 4 MiB", "over 8 MiB"])
def test_a_body_over_the_limit_gets_the_contracts_json_413(ingress, certificates, size):
    assert_json_413(call(ingress, certificates, b" " * size))
    # The ingress still serves afterwards.
    assert call(ingress, certificates, SEED_BODY).status_code == 200


def test_other_paths_and_methods_get_json_answers(ingress, certificates):
    verify, cert = certificates.path("server-ca.crt"), (certificates.path("adi.crt"), certificates.path("adi.key"))
    base = f"https://127.0.0.1:{ingress.port}"
    other = requests.get(f"{base}/healthz", verify=verify, cert=cert, timeout=IO_TIMEOUT_S)
    assert other.status_code == 404 and other.json() == {"detail": "Not Found: no such path"}
    method = requests.get(f"{base}/v1/attribution", verify=verify, cert=cert, timeout=IO_TIMEOUT_S)
    assert method.status_code == 405 and method.json() == {"detail": "Method Not Allowed"}

"""Fixtures of the command line's tests: the command run in process (click's runner) and as an installed script."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from click.testing import CliRunner, Result

from app.cli import cli
from tests.cli.trees import ROOT

#: how long one run of the installed script may take before the test calls it hung (the bound is the behaviour)
SCRIPT_TIMEOUT_S = 120
INSTALL_TIMEOUT_S = 600


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """click's runner environment: every ATTRIBUTION_* variable of the test process unset, then `extra`."""
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("ATTRIBUTION_")}
    env["PROMETHEUS_MULTIPROC_DIR"] = None
    env.update(extra or {})
    return env


RunCli = Callable[..., Result]


@pytest.fixture
def run_cli() -> RunCli:
    """`run_cli(args, env, input=None)`: the command in process, through click's test runner."""

    def run(args: list[str], env: Mapping[str, str] | None = None, input: bytes | str | None = None) -> Result:
        return CliRunner().invoke(cli, args, env=clean_env(env), input=input, catch_exceptions=False)

    return run


# ---------------------------------------------------------------- the installed console script


@dataclass(frozen=True)
class Installed:
    """A fresh copy of the repository's files installed with `pip install .` into a new virtual environment."""

    clone: Path
    venv: Path

    @property
    def script(self) -> Path:
        return self.venv / "bin" / "attribution-adapter"

    def run(
        self,
        args: list[str],
        env: Mapping[str, str] | None = None,
        prefix: Sequence[str] = (),
        input: bytes | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """The script as an operator runs it, from outside the repository, with only `env`'s ATTRIBUTION_*."""
        base = {k: v for k, v in os.environ.items() if not k.startswith("ATTRIBUTION_")}
        base.pop("PROMETHEUS_MULTIPROC_DIR", None)
        base.pop("PYTHONPATH", None)
        return subprocess.run(
            [*prefix, str(self.script), *args],
            env={**base, **(env or {})},
            cwd=self.clone.parent,
            input=input,
            capture_output=True,
            timeout=SCRIPT_TIMEOUT_S,
            check=False,
        )


def _repository_files() -> list[str]:
    """What a fresh clone holds: the tracked files (and new ones not yet committed, while developing)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    return [
        name for name in listed.decode().split("\0") if name and ((ROOT / name).is_file() or (ROOT / name).is_symlink())
    ]


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    base = tmp_path_factory.mktemp("installed")
    try:
        clone = base / "clone"
        for name in _repository_files():
            target = clone / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if (ROOT / name).is_symlink():  # as git checks a link out
                target.symlink_to(os.readlink(ROOT / name))
            else:
                shutil.copy2(ROOT / name, target)
        venv = base / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=INSTALL_TIMEOUT_S)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "."],
            cwd=clone,
            check=True,
            timeout=INSTALL_TIMEOUT_S,
            capture_output=True,
        )
        yield Installed(clone, venv)
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ---------------------------------------------------------------- a small Loki on 127.0.0.1


class FakeLoki:
    """Answers /ready, label values, labels and query_range from `streams`: {host: [(ns epoch, line), ...]}; with
    `refusals` ({path: [(status, Retry-After or None), ...]}), the first calls of a path get those answers first."""

    def __init__(
        self,
        streams: Mapping[str, list[tuple[int, str]]],
        label: str = "host",
        refusals: Mapping[str, list[tuple[int, str | None]]] | None = None,
    ) -> None:
        self.streams = streams
        self.label = label
        self.queries: list[dict[str, list[str]]] = []
        self.refusals = {path: list(script) for path, script in (refusals or {}).items()}
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                url = urlparse(self.path)
                query = parse_qs(url.query)
                owner.queries.append({"path": [url.path], **query})
                refusals = owner.refusals.get(url.path)
                if refusals:
                    status, after = refusals.pop(0)
                    self.send_response(status)
                    if after is not None:
                        self.send_header("Retry-After", after)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif url.path == "/ready":
                    self._send(200, b"ready\n", "text/plain")
                elif url.path == f"/loki/api/v1/label/{owner.label}/values":
                    self._json({"status": "success", "data": sorted(owner.streams)})
                elif url.path.startswith("/loki/api/v1/label/") and url.path.endswith("/values"):
                    self._json({"status": "success", "data": []})
                elif url.path == "/loki/api/v1/labels":
                    self._json({"status": "success", "data": [owner.label, "job"]})
                elif url.path == "/loki/api/v1/query_range":
                    self._json(owner.answer(query))
                else:
                    self._send(404, b"404 page not found\n", "text/plain")

            def _json(self, doc: object) -> None:
                self._send(200, json.dumps(doc).encode(), "application/json")

            def _send(self, status: int, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, query: Mapping[str, list[str]]) -> dict[str, object]:
        selector = query["query"][0]
        # The selector's matcher, as the source writes it: `{host=~"a|b"}` with LogQL string escapes. Streams are
        # labelled with `label` only, so a matcher on another label selects nothing, as in Loki.
        matcher = re.search(r'(\w+)=~"((?:[^"\\]|\\.)*)"', selector)
        assert matcher is not None, selector
        if matcher.group(1) != self.label:
            return {"status": "success", "data": {"resultType": "streams", "result": []}}
        pattern = matcher.group(2).replace("\\\\", "\\")
        start, end, limit = int(query["start"][0]), int(query["end"][0]), int(query["limit"][0])
        result = []
        taken = 0
        for host, values in sorted(self.streams.items()):
            if not re.fullmatch(pattern, host):
                continue
            inside = [[str(ts), line] for ts, line in values if start <= ts < end][: limit - taken]
            taken += len(inside)
            if inside:
                result.append({"stream": {self.label: host}, "values": inside})
        return {"status": "success", "data": {"resultType": "streams", "result": result}}

    def __enter__(self) -> FakeLoki:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def unreachable_url() -> Iterator[str]:
    """A loopback address where nothing listens: the port is held (bound, never listening) so none can take it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}"

"""The README's local run: gunicorn with kernel_log on conf/samples answers the README's curl example as shown."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import requests

from tests.gunicorn_process import ROOT


def _make_run_env() -> dict[str, str]:
    """The ATTRIBUTION_* assignments of the Makefile's `run` recipe, so this test runs what `make run` runs."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    words = shlex.split(recipe.replace("\\\n", " "))
    return dict(word.split("=", 1) for word in words if re.match(r"ATTRIBUTION_[A-Z_]+=", word))


def _readme_example() -> tuple[dict, dict]:
    """The request of the README's first curl example and the answer the README shows for it."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### The local run", 1)[1]
    curl = re.search(r"```sh\ncurl .*?-d '(.*?)'\n```", section, re.S)
    answer = re.search(r"```json\n(.*?)\n```", section, re.S)
    assert curl and answer
    return json.loads(curl.group(1)), json.loads(answer.group(1))


def test_the_readme_curl_example_answers_with_the_finding_it_shows(start_gunicorn):
    env = _make_run_env()
    assert env["ATTRIBUTION_PROVIDER"] == "kernel_log"
    assert Path(ROOT / env["ATTRIBUTION_KERNEL_LOG_DIR"]).is_dir()
    request, shown = _readme_example()
    server = start_gunicorn(env)
    server.wait_ready()
    answer = requests.post(f"{server.base_url}/v1/attribution", json=request, timeout=15)
    assert answer.status_code == 200
    body = answer.json()
    for key in ("schema_version", "service", "attributions", "unattributed_targets"):
        assert body[key] == shown[key], key
    assert "error" not in body and "error" not in shown
    assert body["attribution_session_id"].startswith("as1.")

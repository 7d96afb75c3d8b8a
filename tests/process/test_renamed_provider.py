"""The open provider's old name, `kernel_log`, on real gunicorn: the same provider, the same answers, one boot line.

Two servers on the sample telemetry, one started with `ATTRIBUTION_PROVIDER=kernel_log` and one with `telemetry`,
answer the README's request alike, and a session either one issued continues on the other (as during a rolling
upgrade from a release that knew only the old name to one that knows the new name, in both directions).
"""

from __future__ import annotations

import json
import re

import requests

from app.cli import sample_settings
from tests.gunicorn_process import ROOT
from tests.process.test_operator import json_lines

URL = "/v1/attribution"
#: what differs between two answers to one request by design: the request's id and the new session's id
PER_REQUEST = ("request_id", "attribution_session_id")


def _readme_request() -> dict:
    section = (ROOT / "README.md").read_text().split("### The local run", 1)[1]
    curl = re.search(r"```sh\ncurl .*?-d '(.*?)'\n```", section, re.S)
    assert curl
    return json.loads(curl.group(1))


def _slow(fast: dict, session_id: str) -> dict:
    """The `slow` request continuing `fast`'s session over the epilog window of the samples."""
    scope = {**fast["scope"], "start_time": "2026-09-09T12:05:00Z", "end_time": "2026-09-09T12:20:00Z"}
    return {**fast, "scope": scope, "phase": "slow", "continue_session": session_id}


def _answer(server, body: dict) -> dict:  # noqa: ANN001 - tests.gunicorn_process.Gunicorn
    response = requests.post(f"{server.base_url}{URL}", json=body, timeout=15)
    assert response.status_code == 200, response.text
    return response.json()


def test_the_old_name_boots_the_same_provider_and_sessions_continue_across_the_two(gunicorn):
    settings = {**sample_settings(), "ATTRIBUTION_WORKERS": "1"}
    old = gunicorn({**settings, "ATTRIBUTION_PROVIDER": "kernel_log"})
    new = gunicorn({**settings, "ATTRIBUTION_PROVIDER": "telemetry"})
    request = _readme_request()

    by_old, by_new = _answer(old, request), _answer(new, request)
    assert by_old["service"]["provider"] == by_new["service"]["provider"] == "telemetry"
    assert by_old["attributions"], "the README's request has a finding on the samples"
    assert {k: v for k, v in by_old.items() if k not in PER_REQUEST} == {
        k: v for k, v in by_new.items() if k not in PER_REQUEST
    }

    # A fast to one, its slow to the other, both ways: the session continues and the epilog finding comes back.
    fast = {**request, "scope": {"nodes": ["worker-01", "worker-03"], "ranks": []}}
    for first, second in ((old, new), (new, old)):
        session_id = _answer(first, fast)["attribution_session_id"]
        continued = _answer(second, _slow(fast, session_id))
        assert "error" not in continued, continued
        assert continued["attribution_session_id"] == session_id
        assert [(f["target"]["name"], f["error_category"]) for f in continued["attributions"]] == [
            ("worker-01", "gpu_memory")
        ]

    old.stop()
    new.stop()
    notice = (
        "ATTRIBUTION_PROVIDER=kernel_log is the old name of the 'telemetry' provider and still works; "
        "set ATTRIBUTION_PROVIDER=telemetry"
    )
    old_lines = [entry for entry in json_lines(old.output()) if "old name" in entry["message"]]
    assert [(entry["level"], entry["message"]) for entry in old_lines] == [("warning", notice)]
    assert not [entry for entry in json_lines(new.output()) if "old name" in entry["message"]]

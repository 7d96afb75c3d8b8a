"""Operating the Adapter under real gunicorn on 127.0.0.1: typo'd settings and ports in use stop the start with one
clear JSON line."""

from __future__ import annotations

import json
import socket

import pytest

from app.boot import CANNOT_START
from tests.fakes import FAKE_PROVIDER as FAKE

LINE_KEYS = {"time", "level", "logger", "message"}


def json_lines(output: str) -> list[dict]:
    """Every line of gunicorn's output parsed as one JSON object in the service's format (or the test fails)."""
    lines = []
    for text in output.splitlines():
        try:
            entry = json.loads(text)
        except json.JSONDecodeError:
            pytest.fail(f"not a JSON line: {text!r}\n--- whole output:\n{output}")
        assert isinstance(entry, dict) and LINE_KEYS <= entry.keys(), text
        lines.append(entry)
    assert lines, "gunicorn wrote nothing"
    return lines


def errors(lines: list[dict]) -> list[str]:
    return [entry["message"] for entry in lines if entry["level"] in ("error", "critical")]


def test_an_unknown_setting_stops_the_boot_naming_the_closest(start_gunicorn):
    server = start_gunicorn({"ATTRIBUTION_PROVIDER": FAKE, "ATTRIBUTION_WORKER": "4"})
    assert server.wait_exit() == CANNOT_START
    assert errors(json_lines(server.output())) == [
        "attribution-adapter: cannot start: unknown setting ATTRIBUTION_WORKER; did you mean ATTRIBUTION_WORKERS?"
    ]


def test_another_providers_setting_is_a_json_warning_and_the_server_serves(start_gunicorn):
    server = start_gunicorn({"ATTRIBUTION_PROVIDER": FAKE, "ATTRIBUTION_WORKERS": "1", "ATTRIBUTION_LOKI_URL": "x"})
    server.wait_ready()
    server.stop()
    lines = json_lines(server.output())
    warnings = [entry["message"] for entry in lines if entry["level"] == "warning"]
    assert warnings == [
        "setting not read: ATTRIBUTION_LOKI_URL is a setting of the kernel_log provider; "
        f"ATTRIBUTION_PROVIDER={FAKE} ignores it"
    ]


def test_a_bad_server_setting_is_one_json_line(start_gunicorn):
    server = start_gunicorn({"ATTRIBUTION_PROVIDER": FAKE, "ATTRIBUTION_WORKERS": "many"})
    assert server.wait_exit() == CANNOT_START
    assert errors(json_lines(server.output())) == [
        "attribution-adapter: cannot start: ATTRIBUTION_WORKERS='many' is not an integer"
    ]


@pytest.mark.parametrize("setting", ["ATTRIBUTION_BIND", "ATTRIBUTION_METRICS_BIND"])
def test_a_port_in_use_is_one_clear_line_and_exit_4(start_gunicorn, setting):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        address = f"127.0.0.1:{holder.getsockname()[1]}"
        server = start_gunicorn({"ATTRIBUTION_PROVIDER": FAKE, setting: address})
        code = server.wait_exit()
    output = server.output()
    assert code == CANNOT_START
    assert "Traceback" not in output
    assert errors(json_lines(output)) == [
        f"attribution-adapter: cannot start: {setting}={address} cannot be bound: address already in use"
    ]


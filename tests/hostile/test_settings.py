"""The read bounds are settings with ranges: a value out of range stops the boot with a message naming it."""

from __future__ import annotations

import pytest

from app.settings import ServerSettings, SettingsError


def test_defaults():
    settings = ServerSettings.from_env({})
    assert (settings.header_timeout, settings.body_timeout, settings.body_min_rate) == (10, 30, 4096)
    assert settings.worker_connections == 1000


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ATTRIBUTION_HEADER_TIMEOUT_SECONDS", "0"),
        ("ATTRIBUTION_HEADER_TIMEOUT_SECONDS", "301"),
        ("ATTRIBUTION_BODY_TIMEOUT_SECONDS", "0"),
        ("ATTRIBUTION_BODY_TIMEOUT_SECONDS", "ten"),
        ("ATTRIBUTION_BODY_MIN_RATE", "-1"),
        ("ATTRIBUTION_WORKER_CONNECTIONS", "1"),
        # more digits than `int` reads from text (it refuses 4,300 and more): out of range, not a traceback
        ("ATTRIBUTION_BODY_MIN_RATE", "1" * 5000),
        ("ATTRIBUTION_HEADER_TIMEOUT_SECONDS", "9" * 25),
        # a port is ASCII digits: `²` is a digit to `str.isdigit`, none to `int`
        ("ATTRIBUTION_BIND", "127.0.0.1:\u00b2"),
        ("ATTRIBUTION_METRICS_BIND", "127.0.0.1:\u0668\u0660\u0668\u0660"),
        ("ATTRIBUTION_BIND", "127.0.0.1:" + "0" * 5000 + "80"),
    ],
)
def test_out_of_range_values_are_refused(name, value):
    with pytest.raises(SettingsError, match=name) as refused:
        ServerSettings.from_env({name: value})
    if name == "ATTRIBUTION_BODY_MIN_RATE" and len(value) > 100:  # not written out whole
        assert str(refused.value) == (f"ATTRIBUTION_BODY_MIN_RATE={'1' * 20}... (5000 characters) is out of range: it "
                                      "must be between 0 and 1073741824")


def test_leading_zeros_do_not_count_as_digits():
    settings = ServerSettings.from_env({"ATTRIBUTION_HEADER_TIMEOUT_SECONDS": "0" * 5000 + "12"})
    assert settings.header_timeout == 12


def test_worker_connections_must_exceed_threads():
    with pytest.raises(SettingsError, match="ATTRIBUTION_WORKER_CONNECTIONS"):
        ServerSettings.from_env({"ATTRIBUTION_THREADS": "16", "ATTRIBUTION_WORKER_CONNECTIONS": "16"})


def test_a_bad_bound_stops_gunicorn_before_it_serves(start_gunicorn):
    from tests.fakes import FAKE_PROVIDER

    server = start_gunicorn({"ATTRIBUTION_PROVIDER": FAKE_PROVIDER, "ATTRIBUTION_BODY_MIN_RATE": "fast"})
    assert server.wait_exit() != 0
    assert "ATTRIBUTION_BODY_MIN_RATE='fast' is not an integer" in server.output()

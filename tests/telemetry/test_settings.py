"""Boot: `from_options` validates every setting and names the variable and the problem."""

from pathlib import Path

import pytest

from providers import load_provider
from providers.base import ProviderConstructionError
from providers.telemetry import TelemetryProvider


def build(**options: str) -> TelemetryProvider:
    return TelemetryProvider.from_options(options)


@pytest.fixture
def logs(tmp_path: Path) -> str:
    (tmp_path / "logs").mkdir()
    return str(tmp_path / "logs")


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({}, "ATTRIBUTION_KERNEL_LOG_SOURCE is not set"),
        ({"ATTRIBUTION_KERNEL_LOG_SOURCE": "journald"}, "ATTRIBUTION_KERNEL_LOG_SOURCE='journald' is unknown"),
        ({"ATTRIBUTION_KERNEL_LOG_SOURCE": "files"}, "ATTRIBUTION_KERNEL_LOG_DIR is not set"),
        (
            {"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": "/nonexistent/logs"},
            "ATTRIBUTION_KERNEL_LOG_DIR='/nonexistent/logs' is not an existing directory",
        ),
        ({"ATTRIBUTION_KERNEL_LOG_SOURCE": "loki"}, "ATTRIBUTION_LOKI_URL is not set"),
        ({"ATTRIBUTION_KERNEL_LOG_SOURCE": "loki", "ATTRIBUTION_LOKI_URL": "loki:3100"}, "ATTRIBUTION_LOKI_URL"),
        (
            {
                "ATTRIBUTION_KERNEL_LOG_SOURCE": "loki",
                "ATTRIBUTION_LOKI_URL": "http://l",
                "ATTRIBUTION_LOKI_LIMIT": "9000",
            },
            "ATTRIBUTION_LOKI_LIMIT=9000 is out of range",
        ),
        (
            {
                "ATTRIBUTION_KERNEL_LOG_SOURCE": "loki",
                "ATTRIBUTION_LOKI_URL": "http://l",
                "ATTRIBUTION_LOKI_LIMIT": "1e3",
            },
            "ATTRIBUTION_LOKI_LIMIT='1e3' is not an integer",
        ),
        (
            {
                "ATTRIBUTION_KERNEL_LOG_SOURCE": "loki",
                "ATTRIBUTION_LOKI_URL": "http://l",
                "ATTRIBUTION_LOKI_SELECTOR": '{host="a"}',
            },
            "ATTRIBUTION_LOKI_SELECTOR='{host=\"a\"}' cannot be used: the placeholder {hosts} must be the whole "
            'quoted value of a label matcher, e.g. {host=~"{hosts}"}; the template does not contain it',
        ),
        (
            {
                "ATTRIBUTION_KERNEL_LOG_SOURCE": "loki",
                "ATTRIBUTION_LOKI_URL": "http://l",
                "ATTRIBUTION_LOKI_HOST_LABEL": "host-name",
            },
            "ATTRIBUTION_LOKI_HOST_LABEL",
        ),
        (
            {"ATTRIBUTION_KERNEL_LOG_SOURCE": "loki", "ATTRIBUTION_LOKI_URL": "http://l", "ATTRIBUTION_LOKI_LIMT": "5"},
            "ATTRIBUTION_LOKI_LIMT is not a telemetry setting",
        ),
    ],
)
def test_construction_errors(options: dict, needle: str) -> None:
    with pytest.raises(ProviderConstructionError) as info:
        build(**options)
    assert needle in str(info.value)


@pytest.mark.parametrize(
    ("name", "value", "needle"),
    [
        ("ATTRIBUTION_KERNEL_LOG_LOOKBACK_SECONDS", "0", "out of range"),
        ("ATTRIBUTION_KERNEL_LOG_LOOKBACK_SECONDS", "ten", "not an integer"),
        ("ATTRIBUTION_KERNEL_LOG_GRACE_SECONDS", "-1", "out of range"),
        ("ATTRIBUTION_KERNEL_LOG_MAX_EVIDENCE", "33", "out of range"),
        ("ATTRIBUTION_EPILOG_DIR", "/nonexistent/epilog", "is not an existing directory"),
    ],
)
def test_number_and_epilog_errors(logs: str, name: str, value: str, needle: str) -> None:
    with pytest.raises(ProviderConstructionError) as info:
        build(ATTRIBUTION_KERNEL_LOG_SOURCE="files", ATTRIBUTION_KERNEL_LOG_DIR=logs, **{name: value})
    assert name in str(info.value) and needle in str(info.value)


def test_defaults_and_registry(logs: str) -> None:
    provider = load_provider(
        "telemetry", {"ATTRIBUTION_KERNEL_LOG_SOURCE": "files", "ATTRIBUTION_KERNEL_LOG_DIR": logs}
    )
    assert isinstance(provider, TelemetryProvider) and provider.name == "telemetry"
    s = provider.settings
    assert (s.lookback.total_seconds(), s.grace.total_seconds(), s.max_evidence, s.epilog_dir) == (900, 120, 8, None)


def test_unreadable_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "locked"
    d.mkdir(mode=0)
    real_iterdir = Path.iterdir

    def iterdir(self: Path):  # noqa: ANN202 - as the OS answers a non-root reader of a mode-0 directory
        if self == d:
            raise PermissionError(13, "Permission denied", str(self))
        return real_iterdir(self)

    # Tests may run as root, which reads every directory: make the refusal explicit instead.
    monkeypatch.setattr(Path, "iterdir", iterdir)
    with pytest.raises(ProviderConstructionError) as info:
        build(ATTRIBUTION_KERNEL_LOG_SOURCE="files", ATTRIBUTION_KERNEL_LOG_DIR=str(d))
    assert "ATTRIBUTION_KERNEL_LOG_DIR" in str(info.value) and "cannot be read" in str(info.value)


def test_time_zone_is_an_iana_name_checked_at_boot(logs: str) -> None:
    provider = build(
        ATTRIBUTION_KERNEL_LOG_SOURCE="files",
        ATTRIBUTION_KERNEL_LOG_DIR=logs,
        ATTRIBUTION_KERNEL_LOG_TIME_ZONE="Asia/Tokyo",
    )
    assert str(provider.settings.time_zone) == "Asia/Tokyo"
    assert (
        str(build(ATTRIBUTION_KERNEL_LOG_SOURCE="files", ATTRIBUTION_KERNEL_LOG_DIR=logs).settings.time_zone) == "UTC"
    )
    for bad in ("Mars/Olympus", "+02:00", "../etc/passwd"):
        with pytest.raises(ProviderConstructionError) as info:
            build(
                ATTRIBUTION_KERNEL_LOG_SOURCE="files",
                ATTRIBUTION_KERNEL_LOG_DIR=logs,
                ATTRIBUTION_KERNEL_LOG_TIME_ZONE=bad,
            )
        assert "ATTRIBUTION_KERNEL_LOG_TIME_ZONE" in str(info.value)

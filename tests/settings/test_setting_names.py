"""Settings that refuse typos: every `ATTRIBUTION_*` variable is declared by the service or a provider (boot)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import providers.fact as fact
import providers.telemetry as telemetry
from app.boot import boot
from app.setting_names import builtin_declarations
from app.settings import SERVICE_SETTINGS, SettingsError
from tests.fakes import FAKE_PROVIDER
from tests.settings import undeclared_plugin

ROOT = Path(__file__).resolve().parents[2]
UNDECLARED = "tests.settings.undeclared_plugin:from_options"


def refused(env: dict[str, str]) -> str:
    with pytest.raises(SettingsError) as info:
        boot(env)
    return str(info.value)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"ATTRIBUTION_PROVIDER": FAKE_PROVIDER, "ATTRIBUTION_WORKER": "4"},
            "unknown setting ATTRIBUTION_WORKER; did you mean ATTRIBUTION_WORKERS?",
        ),
        (
            {"ATTRIBUTION_PROVIDER": "telemetry", "ATTRIBUTION_KERNEL_LOG_DRI": "/var/log/hosts"},
            "unknown setting ATTRIBUTION_KERNEL_LOG_DRI; did you mean ATTRIBUTION_KERNEL_LOG_DIR?",
        ),
        (
            {"ATTRIBUTION_PROVIDER": "fact", "ATTRIBUTION_FACT_ENDPONT": "http://fact"},
            "unknown setting ATTRIBUTION_FACT_ENDPONT; did you mean ATTRIBUTION_FACT_ENDPOINT?",
        ),
        # A typo of the provider setting itself is named, not "ATTRIBUTION_PROVIDER is not set".
        (
            {"ATTRIBUTION_PROVIDR": "telemetry"},
            "unknown setting ATTRIBUTION_PROVIDR; did you mean ATTRIBUTION_PROVIDER?",
        ),
        # A declared test fake's own variables are checked as well.
        (
            {"ATTRIBUTION_PROVIDER": FAKE_PROVIDER, "ATTRIBUTION_FAKE_DELAY": "5"},
            "unknown setting ATTRIBUTION_FAKE_DELAY; did you mean ATTRIBUTION_FAKE_DELAY_MS?",
        ),
    ],
)
def test_an_unknown_setting_stops_the_boot_naming_the_closest(env: dict[str, str], message: str) -> None:
    assert refused(env) == message


def test_a_name_like_nothing_declared_has_no_suggestion() -> None:
    assert refused({"ATTRIBUTION_PROVIDER": FAKE_PROVIDER, "ATTRIBUTION_QQQQQQQQ": "1"}) == (
        "unknown setting ATTRIBUTION_QQQQQQQQ"
    )


def test_every_unknown_setting_is_named_at_once() -> None:
    message = refused({"ATTRIBUTION_PROVIDER": FAKE_PROVIDER, "ATTRIBUTION_WORKER": "4", "ATTRIBUTION_THREAD": "2"})
    assert "unknown setting ATTRIBUTION_THREAD; did you mean ATTRIBUTION_THREADS?" in message
    assert "unknown setting ATTRIBUTION_WORKER; did you mean ATTRIBUTION_WORKERS?" in message


def test_another_providers_setting_is_a_warning_and_the_boot_goes_on() -> None:
    booted = boot({"ATTRIBUTION_PROVIDER": FAKE_PROVIDER, "ATTRIBUTION_LOKI_URL": "http://loki:3100"})
    assert booted.provider.name == "fake"
    assert booted.warnings == (
        "ATTRIBUTION_LOKI_URL is a setting of the telemetry provider; "
        f"ATTRIBUTION_PROVIDER={FAKE_PROVIDER} ignores it",
    )


def test_declared_settings_boot_without_warnings(tmp_path: Path) -> None:
    booted = boot(
        {
            "ATTRIBUTION_PROVIDER": "telemetry",
            "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
            "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path),
            "ATTRIBUTION_EPILOG_DIR": str(tmp_path),
            "ATTRIBUTION_WORKERS": "3",
        }
    )
    assert booted.warnings == ()
    assert booted.server.workers == 3


def test_the_providers_old_name_reads_its_settings_and_boot_names_the_new_name(tmp_path: Path) -> None:
    env = {
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
        "ATTRIBUTION_KERNEL_LOG_DIR": str(tmp_path),
        "ATTRIBUTION_EPILOG_DIR": str(tmp_path),
    }
    old = boot({**env, "ATTRIBUTION_PROVIDER": "kernel_log"})
    new = boot({**env, "ATTRIBUTION_PROVIDER": "telemetry"})
    assert old.warnings == new.warnings == () and new.notices == ()
    assert type(old.provider) is type(new.provider) and old.provider.name == "telemetry"
    assert old.notices == (
        "ATTRIBUTION_PROVIDER=kernel_log is the old name of the 'telemetry' provider and still works; "
        "set ATTRIBUTION_PROVIDER=telemetry",
    )
    # A typo of a setting is refused under the old name as under the new one.
    with pytest.raises(SettingsError, match="did you mean ATTRIBUTION_KERNEL_LOG_DIR"):
        boot({**env, "ATTRIBUTION_PROVIDER": "kernel_log", "ATTRIBUTION_KERNEL_LOG_DIRR": str(tmp_path)})


def test_a_plugin_without_settings_gets_its_variables_unchecked_with_a_warning() -> None:
    booted = boot({"ATTRIBUTION_PROVIDER": UNDECLARED, "ATTRIBUTION_SITE_TOKEN": "t0ken"})
    assert undeclared_plugin.SEEN["ATTRIBUTION_SITE_TOKEN"] == "t0ken"
    assert booted.warnings == (
        f"ATTRIBUTION_SITE_TOKEN is not declared: passed unchecked to {UNDECLARED}, whose module declares no SETTINGS",
    )


def test_a_plugin_without_settings_still_refuses_a_near_miss_of_a_declared_name() -> None:
    message = refused({"ATTRIBUTION_PROVIDER": UNDECLARED, "ATTRIBUTION_WORKER": "4"})
    assert message == "unknown setting ATTRIBUTION_WORKER; did you mean ATTRIBUTION_WORKERS?"


def _documented() -> set[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Environment variables\n", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `(ATTRIBUTION_[A-Z0-9_]+)` \|", section, flags=re.MULTILINE))


def test_the_readme_documents_exactly_the_declared_settings() -> None:
    declared = set().union(*builtin_declarations().values())
    documented = _documented()
    assert {s.name for s in SERVICE_SETTINGS} <= declared and len(documented) > 20
    assert sorted(declared - documented) == [], "declared but not in the README's Environment variables table"
    assert sorted(documented - declared) == [], "in the README's table but declared by no one"


def test_each_readme_row_is_its_declaration_with_default_bounds_and_meaning() -> None:
    """The README's row of every built-in setting is what its declaration says, default and bounds included."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Environment variables\n", 1)[1].split("\n## ", 1)[0]
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(ATTRIBUTION_[A-Z0-9_]+)` \|.*$", section, re.MULTILINE)}
    declarations = [*SERVICE_SETTINGS, *telemetry.SETTINGS, *fact.SETTINGS]
    assert len(declarations) == len(rows)
    for setting in declarations:
        assert rows[setting.name] == setting.readme_row()

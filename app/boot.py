"""Boot: the one function that builds the settings and the provider, for `wsgi.py` and the command line alike."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from app.setting_names import check_setting_names
from app.settings import ServerSettings, Settings, SettingsError
from providers import load_provider, renamed_notice
from providers.base import Provider, ProviderConstructionError

#: what stops a boot; the message names the setting or dependency to fix
BOOT_ERRORS = (SettingsError, ProviderConstructionError)
#: the exit code of a process that cannot start: gunicorn halts on it (instead of respawning workers forever) when a
#: worker exits with it, and the command line uses it too
CANNOT_START = 4


@dataclass(frozen=True)
class Booted:
    settings: Settings
    server: ServerSettings
    provider: Provider
    #: what is set but not read (another provider's setting, a plug-in's undeclared variable): worth a warning
    warnings: tuple[str, ...] = ()
    #: what works but has a new spelling (a provider's old name): one line each at boot
    notices: tuple[str, ...] = ()


def boot(environ: Mapping[str, str] | None = None) -> Booted:
    """Validate every `ATTRIBUTION_*` setting of `environ` (default: the process's) and construct the provider.

    An `ATTRIBUTION_*` variable that no declaration names is an error (see app/setting_names.py).
    Raises one of BOOT_ERRORS, whose message names what to fix. The server's settings are validated here too (the
    gunicorn config reads them first), so a check that boots this way sees every setting a real start sees.
    """
    env = os.environ if environ is None else environ
    warnings = check_setting_names(env)
    settings = Settings.from_env(env)
    server = ServerSettings.from_env(env)
    provider = load_provider(settings.provider, settings.options)
    notice = renamed_notice(settings.provider)
    return Booted(settings, server, provider, warnings, (notice,) if notice else ())

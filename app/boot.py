"""Boot: the one function that builds the settings and the provider, for `wsgi.py` and the command line alike."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.settings import ServerSettings, Settings, SettingsError
from providers import load_provider
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


def boot(environ: Mapping[str, str] | None = None) -> Booted:
    """Validate every `ATTRIBUTION_*` setting of `environ` (default: the process's) and construct the provider.

    Raises one of BOOT_ERRORS, whose message names what to fix. The server's settings are validated here too (the
    gunicorn config reads them first), so a check that boots this way sees every setting a real start sees.
    """
    settings = Settings.from_env(environ)
    server = ServerSettings.from_env(environ)
    provider = load_provider(settings.provider, settings.options)
    return Booted(settings, server, provider)

"""Settings that refuse typos: every `ATTRIBUTION_*` variable must be one that the service or a provider declares.

The declarations are data: `app.settings.SERVICE_SETTINGS` for the service, and a provider's `SETTINGS` (see
`providers.declared_settings`) for each built-in provider and for a plug-in that declares one. At boot:

- a variable no declaration names stops the boot, naming the closest declared one when there is one;
- a variable that another built-in provider declares (a `telemetry` setting while the provider is `fact`) is a
  warning: it is not read;
- a plug-in provider that declares no `SETTINGS` is passed every variable as before, and the check cannot tell its
  own variables from typos: then only a near miss of a declared name (the part after the prefix at least
  NEAR_MISS similar, by difflib's ratio) stops the boot; every other undeclared variable is a warning.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from app.settings import PREFIX, SERVICE_SETTINGS, SettingsError
from providers import BUILTIN_PROVIDERS, PROVIDER_SETTING, builtin_name, declared_settings
from providers.settings import names

#: how alike (difflib ratio of the names after the prefix) a suggestion must be
SUGGEST_CUTOFF = 0.6
#: how alike an undeclared variable must be to a declared one to count as its typo when a plug-in declares nothing
NEAR_MISS = 0.85


def builtin_declarations() -> dict[str, frozenset[str]]:
    """Owner ("service" or a built-in provider's name) -> the names it declares."""
    owners = {"service": names(SERVICE_SETTINGS)}
    for name in sorted(BUILTIN_PROVIDERS):
        owners[name] = declared_settings(name) or frozenset()
    return owners


def _closest(name: str, candidates: set[str], cutoff: float) -> str | None:
    by_suffix = {c.removeprefix(PREFIX): c for c in candidates}
    match = difflib.get_close_matches(name.removeprefix(PREFIX), list(by_suffix), n=1, cutoff=cutoff)
    return by_suffix[match[0]] if match else None


def check_setting_names(environ: Mapping[str, str]) -> tuple[str, ...]:
    """Check every `ATTRIBUTION_*` name of `environ`; return the warnings, raise SettingsError for unknown names."""
    written = (environ.get(PROVIDER_SETTING) or "").strip()
    provider = builtin_name(written)
    owners = builtin_declarations()
    plugin = ":" in provider and provider not in BUILTIN_PROVIDERS
    plugin_declared = declared_settings(provider) if plugin else None
    if plugin_declared is not None:
        owners[provider] = plugin_declared
    known = set().union(*owners.values())
    # A provider that is unset or unknown gets its own error from boot; every declared name counts as read then.
    chosen = provider in owners or (plugin and plugin_declared is not None)
    readable = owners["service"] | owners.get(provider, frozenset()) if chosen else known

    unknown: list[str] = []
    warnings: list[str] = []
    for name in sorted(n for n in environ if n.startswith(PREFIX)):
        if name in readable:
            continue
        if name in known:
            owner = next(o for o, names in owners.items() if name in names)
            warnings.append(f"{name} is a setting of the {owner} provider; {PROVIDER_SETTING}={written} ignores it")
            continue
        if plugin and plugin_declared is None:
            if _closest(name, known, NEAR_MISS) is None:
                warnings.append(
                    f"{name} is not declared: passed unchecked to {provider}, whose module declares no SETTINGS"
                )
                continue
        suggestion = _closest(name, known, SUGGEST_CUTOFF)
        unknown.append(f"unknown setting {name}" + (f"; did you mean {suggestion}?" if suggestion else ""))
    if unknown:
        raise SettingsError("; ".join(unknown))
    return tuple(warnings)

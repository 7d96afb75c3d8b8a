"""The provider registry: `load_provider` builds the provider that `ATTRIBUTION_PROVIDER` names.

Built-in providers are imported only when chosen, so importing this package never pulls in a private or optional
dependency. A `module:attribute` path plugs in a provider kept outside the package (a test fake, a site build).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

from providers.base import Provider, ProviderConstructionError
from providers.settings import names

ProviderFactory = Callable[[Mapping[str, str]], Provider]

#: registry name -> "module:attribute" of a factory taking the `ATTRIBUTION_*` options
BUILTIN_PROVIDERS: dict[str, str] = {
    "fact": "providers.fact:FactProvider.from_options",
    "telemetry": "providers.telemetry:TelemetryProvider.from_options",
}
#: old registry names still accepted -> the built-in name each stands for. A deployment that sets an old name keeps
#: working (boot logs one line naming the new name); answers, metrics and `check` show the new name.
RENAMED_PROVIDERS: dict[str, str] = {
    "kernel_log": "telemetry",
}

PROVIDER_SETTING = "ATTRIBUTION_PROVIDER"


def _resolve(path: str, shown: str) -> ProviderFactory:
    """The factory at `path`; errors show the setting as the operator wrote it (`shown`)."""
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ProviderConstructionError(f"{PROVIDER_SETTING}={shown!r} is not a 'module:attribute' path")
    try:
        target: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise ProviderConstructionError(f"{PROVIDER_SETTING}={shown!r}: cannot import {module_name!r}: {exc}") from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as exc:
            raise ProviderConstructionError(
                f"{PROVIDER_SETTING}={shown!r}: {module_name!r} has no attribute {attribute!r}"
            ) from exc
    if not callable(target):
        raise ProviderConstructionError(f"{PROVIDER_SETTING}={shown!r} does not name a callable provider factory")
    return target  # type: ignore[return-value]


def builtin_name(name: str) -> str:
    """The built-in name `name` stands for: itself, or the current name of a renamed provider."""
    return RENAMED_PROVIDERS.get(name, name)


def renamed_notice(name: str | None) -> str | None:
    """The line boot logs when `ATTRIBUTION_PROVIDER` holds an old name; None for any other value."""
    if name not in RENAMED_PROVIDERS:
        return None
    return (
        f"{PROVIDER_SETTING}={name} is the old name of the {RENAMED_PROVIDERS[name]!r} provider and still works; "
        f"set {PROVIDER_SETTING}={RENAMED_PROVIDERS[name]}"
    )


def declared_settings(name: str) -> frozenset[str] | None:
    """The `ATTRIBUTION_*` names the provider `name` reads, from the `SETTINGS` of the module before the colon of
    its `module:attribute` path (for a built-in name, of its registry path): an iterable of `providers.settings.Setting`
    declarations or of plain variable names.

    None when that module declares no `SETTINGS` or cannot be imported (`load_provider` then names the problem).
    """
    name = builtin_name(name)
    path = BUILTIN_PROVIDERS.get(name, name)
    module_name = path.partition(":")[0]
    if not module_name:
        return None
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    declared = getattr(module, "SETTINGS", None)
    if declared is None:
        return None
    return names(declared)


def load_provider(name: str | None, options: Mapping[str, str]) -> Provider:
    """Construct the provider `name` (a built-in name or `module:attribute`) with the `ATTRIBUTION_*` options.

    Raises ProviderConstructionError with a message that names what is missing.
    """
    known = ", ".join(sorted(BUILTIN_PROVIDERS))
    if name:
        name = builtin_name(name)
    if not name:
        raise ProviderConstructionError(
            f"{PROVIDER_SETTING} is not set: choose one of {known}, or a 'module:attribute' path"
        )
    if name in BUILTIN_PROVIDERS:
        factory = _resolve(BUILTIN_PROVIDERS[name], name)
    elif ":" in name:
        factory = _resolve(name, name)
    else:
        raise ProviderConstructionError(
            f"{PROVIDER_SETTING}={name!r} is not a known provider: choose one of {known}, or a 'module:attribute' path"
        )
    provider = factory(options)
    if not isinstance(provider, Provider):
        raise ProviderConstructionError(f"{PROVIDER_SETTING}={name!r} did not build a Provider")
    return provider

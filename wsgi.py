"""gunicorn's entry point, and the one place a real process builds its settings and provider."""

import logging

from app import create_app
from app.settings import Settings, SettingsError
from providers import load_provider
from providers.base import ProviderConstructionError

# gunicorn halts (instead of respawning workers forever) when a worker exits with this code.
APP_LOAD_ERROR = 4

try:
    _settings = Settings.from_env()
    _provider = load_provider(_settings.provider, _settings.options)
except (SettingsError, ProviderConstructionError) as exc:
    logging.getLogger("attribution_adapter").critical("attribution-adapter: cannot start: %s", exc)
    raise SystemExit(APP_LOAD_ERROR) from None

app = create_app(_settings, _provider)

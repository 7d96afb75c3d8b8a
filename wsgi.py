"""gunicorn's entry point: builds settings and provider through `app.boot`, as the command line does."""

import logging

from app import create_app
from app.boot import BOOT_ERRORS, CANNOT_START, boot

try:
    _booted = boot()
except BOOT_ERRORS as exc:
    logging.getLogger("attribution_adapter").critical("attribution-adapter: cannot start: %s", exc)
    raise SystemExit(CANNOT_START) from None

for _warning in _booted.warnings:
    logging.getLogger("attribution_adapter").warning("setting not read: %s", _warning)
for _notice in _booted.notices:
    logging.getLogger("attribution_adapter").warning("%s", _notice)

app = create_app(_booted.settings, _booted.provider)

"""A plug-in provider whose module declares no `SETTINGS`: it gets every `ATTRIBUTION_*` variable, unchecked."""

from __future__ import annotations

from collections.abc import Mapping

from providers.base import Provider
from tests.fakes import FakeProvider

#: what the last `from_options` call was given, for the tests to look at
SEEN: dict[str, str] = {}


def from_options(options: Mapping[str, str]) -> Provider:
    SEEN.clear()
    SEEN.update(options)
    return FakeProvider()

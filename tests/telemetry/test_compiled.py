"""A compiled part a checkout never built is refused at import with the command that builds it."""

from __future__ import annotations

import pytest

from providers.telemetry.compiled import compiled


def test_a_part_that_was_never_built_names_the_command_that_builds_it() -> None:
    with pytest.raises(ImportError, match=r"providers\.telemetry\.no_such_part is not built: `make venv`"):
        compiled("providers.telemetry.no_such_part")


def test_a_built_part_is_the_module_itself() -> None:
    gaps = compiled("providers.telemetry.joblog._gaps")
    assert gaps.place(b"[rank3]:x\n", 0, 10, 507) == (1, ((3, 0, 9, 1),), 3)

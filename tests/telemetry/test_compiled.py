"""A compiled part a checkout never built is refused at import with the command that builds it; one built but missing
its library, with what the loader missed."""

from __future__ import annotations

import pytest

from providers.telemetry.compiled import compiled


def test_a_part_that_was_never_built_names_the_command_that_builds_it() -> None:
    with pytest.raises(ImportError, match=r"providers\.telemetry\.no_such_part is not built: `make venv`"):
        compiled("providers.telemetry.no_such_part")


def test_a_built_part_is_the_module_itself() -> None:
    gaps = compiled("providers.telemetry.joblog._gaps")
    assert gaps.place(b"[rank3]:x\n", 0, 10, 507) == (1, ((3, 0, 9, 1),), 3)


def test_a_built_part_whose_library_is_missing_says_what_the_loader_missed(tmp_path, monkeypatch) -> None:
    # what the loader raises for a built part whose shared library is not installed where it runs
    (tmp_path / "part_without_its_library.py").write_text(
        'raise ImportError("libhs.so.5: cannot open shared object file: No such file or directory")\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match=r"part_without_its_library is built but cannot be loaded: libhs\.so\.5: "
                                          r"cannot open .*Debian's libvectorscan5"):
        compiled("part_without_its_library")

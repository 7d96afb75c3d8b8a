"""Every regular expression of the service matches the same on every Python 3.11 it runs on.

CPython before 3.11.5 matches a possessive quantifier (`X?+`, `X{0,n}+`) or an atomic group wrongly when what it
holds can backtrack (an alternation, a lookaround, a repeat that gives back): it can hang or miss matches (CPython
issues gh-100061 and gh-106052). Debian bookworm's `python3` is 3.11.2, and the image test builds the image on
it. So a possessive quantifier or an atomic group holds only what matches one way: literals, character sets, and
possessive repeats of those; an optional part with alternatives is written as a choice with an empty alternative.

The patterns are taken from every module of the service (module attributes, the containers and dataclasses they
hold, the catalogue-built patterns of `kernel/nvstatus.py`), in the compiled form `re` itself parses.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import re
import re._constants as c  # the parsed form of a pattern, as `re` itself parses it
import re._parser as sre_parse
from typing import Any

import pytest

from providers.telemetry.kernel import nvstatus

_ONE_WAY = {c.LITERAL, c.NOT_LITERAL, c.IN, c.ANY, c.CATEGORY, c.AT}


def _one_way(tree: Any) -> bool:
    """Whether `tree` matches a text in at most one way: nothing in it that can give back or try an alternative."""
    for op, av in tree:
        if op in _ONE_WAY:
            continue
        if op is c.SUBPATTERN and _one_way(av[3]):
            continue
        if op is c.POSSESSIVE_REPEAT and _one_way(av[2]):
            continue
        if op is c.ATOMIC_GROUP and _one_way(av):
            continue
        return False
    return True


def _problems(tree: Any, out: list[str]) -> list[str]:
    for op, av in tree:
        if op is c.POSSESSIVE_REPEAT:
            if not _one_way(av[2]):
                out.append(f"possessive repeat {{{av[0]},{av[1]}}} over a part that can backtrack")
            _problems(av[2], out)
        elif op is c.ATOMIC_GROUP:
            if not _one_way(av):
                out.append("atomic group over a part that can backtrack")
            _problems(av, out)
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT):
            _problems(av[2], out)
        elif op is c.SUBPATTERN:
            _problems(av[3], out)
        elif op is c.BRANCH:
            for branch in av[1]:
                _problems(branch, out)
        elif op in (c.ASSERT, c.ASSERT_NOT):
            _problems(av[1], out)
        elif op is c.GROUPREF_EXISTS:
            _problems(av[1], out)
            if av[2]:
                _problems(av[2], out)
    return out


def _collect(value: Any, where: str, found: dict[tuple[Any, int], str], depth: int = 0) -> None:
    if isinstance(value, re.Pattern):
        found.setdefault((value.pattern, value.flags), where)
    elif depth > 3:
        return
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            _collect(item, where, found, depth + 1)
    elif isinstance(value, dict):
        for item in value.values():
            _collect(item, where, found, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            _collect(getattr(value, field.name, None), f"{where}.{field.name}", found, depth + 1)


def _service_patterns() -> dict[tuple[Any, int], str]:
    found: dict[tuple[Any, int], str] = {}
    for package in ("app", "providers", "schemas"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            module = importlib.import_module(info.name)
            for name, value in vars(module).items():
                _collect(value, f"{info.name}.{name}", found)
    _collect(nvstatus.tables(), "providers.telemetry.kernel.nvstatus.tables()", found)
    return found


PATTERNS = _service_patterns()


def test_the_service_s_patterns_are_found() -> None:
    wheres = set(PATTERNS.values())
    assert len(PATTERNS) > 80
    assert any(where.endswith("joblog.lines.MARKER") or where.endswith("joblog.patterns.MARKER") for where in wheres)
    assert "providers.telemetry.joblog.prefilter._RANK_AT_START" in wheres
    assert any(where.startswith("providers.telemetry.kernel.nvstatus.tables()") for where in wheres)


@pytest.mark.parametrize("key", list(PATTERNS), ids=lambda key: PATTERNS[key])
def test_no_possessive_part_can_backtrack(key: tuple[Any, int]) -> None:
    pattern, flags = key
    assert _problems(sre_parse.parse(pattern, flags), []) == []


@pytest.mark.parametrize(
    "bad",
    [
        rb"\[rank(?:(?<=\n\[rank)(\d{1,9}+)\]:)?+",  # hangs on 3.11.2
        rb"\n(?:[^\n\[]|\[(?!rank)){0,500}+\[rank(\d{1,9}+)\]:",  # finds nothing on 3.11.2
        r"(?:ab?c)*+",
        r"(?P<zone>Z|[+-]\d{2})?+",
        r"(?>a|ab)c",
    ],
)
def test_the_check_catches_what_it_is_for(bad: bytes | str) -> None:
    assert _problems(sre_parse.parse(bad), [])


@pytest.mark.parametrize("good", [r"\d{1,9}+", r"(?:[.,](?P<frac>\d{1,9}+))?+", r"(?:ID )?+", r"(?:Z|[+-]\d\d|)"])
def test_what_matches_one_way_may_be_possessive(good: str) -> None:
    assert _problems(sre_parse.parse(good), []) == []

"""The catalogue: NVIDIA's Xid, NVLink5 decode and NVSwitch SXid facts with the Adapter's decisions, from one CSV file.

The data is `data/xid_catalogue.csv` beside this module; its header names the sources and their versions. This module
only loads and checks it; the line-dependent decode rules it names live in `decode.py`. The driver's status codes
(`NV_ERR_*` in `NVRM:` lines) are a catalogue of their own beside it (`nvstatus.py`).
"""

from __future__ import annotations

import csv
import enum
import functools
from dataclasses import dataclass
from importlib import resources

from providers.telemetry.ranking import CATEGORY_RANK

CATALOGUE_FILE = "xid_catalogue.csv"


class Points(enum.StrEnum):
    """Whom an event points at."""

    NODE = "node"
    JOB = "job"
    NOTHING = "nothing"
    #: the provider cannot tell (a code the catalogue lacks, a line it cannot decode): never a finding, and the node
    #: is not listed as unattributed
    UNKNOWN = "unknown"


_DECISIONS = {"node": Points.NODE, "job": Points.JOB, "none": Points.NOTHING}
_FATALITY = {"non_fatal", "potentially_fatal", "always_fatal"}


@dataclass(frozen=True)
class Row:
    """One row of the catalogue file."""

    kind: str  # xid, sxid or nvlink5
    code: int
    name: str
    description: str
    immediate: str
    investigatory: str
    fatality: str
    points: Points
    category: str | None
    rule: str
    reason: str
    #: NVIDIA's own words on what the event is, where they decide (empty elsewhere)
    meaning: str = ""


@dataclass(frozen=True)
class Catalogue:
    xid: dict[int, Row]
    sxid: dict[int, Row]
    nvlink5: tuple[Row, ...]


class CatalogueError(ValueError):
    """The catalogue file breaks its own format (a packaging or editing mistake, found at import)."""


def _row(fields: dict[str, str], line: int) -> Row:
    try:
        code = int(fields["code"])
        points = _DECISIONS[fields["decision"]]
    except (KeyError, ValueError) as exc:
        raise CatalogueError(f"{CATALOGUE_FILE} line {line}: bad code or decision") from exc
    category = fields["category"] or None
    if (category is None) != (points is Points.NOTHING) or (category is not None and category not in CATEGORY_RANK):
        raise CatalogueError(f"{CATALOGUE_FILE} line {line}: category {category!r} does not fit the decision")
    if fields["kind"] == "sxid" and fields["fatality"] not in _FATALITY:
        raise CatalogueError(f"{CATALOGUE_FILE} line {line}: an SXid row needs its fatality")
    return Row(
        kind=fields["kind"],
        code=code,
        name=fields["name"],
        description=fields["description"],
        immediate=fields["immediate"],
        investigatory=fields["investigatory"],
        fatality=fields["fatality"],
        points=points,
        category=category,
        rule=fields["rule"],
        reason=fields["reason"],
        meaning=fields.get("meaning") or "",
    )


def parse_catalogue(text: str) -> Catalogue:
    """Read the catalogue's CSV text (lines starting with `#` are comments)."""
    numbered = [(i, line) for i, line in enumerate(text.splitlines(), start=1) if line and not line.startswith("#")]
    reader = csv.DictReader(line for _, line in numbered)
    xid: dict[int, Row] = {}
    sxid: dict[int, Row] = {}
    nvlink5: list[Row] = []
    for (line_no, _), fields in zip(numbered[1:], reader, strict=True):
        row = _row(fields, line_no)
        if row.kind == "nvlink5":
            nvlink5.append(row)
            continue
        table = {"xid": xid, "sxid": sxid}.get(row.kind)
        if table is None or row.code in table:
            raise CatalogueError(f"{CATALOGUE_FILE} line {line_no}: unknown kind or repeated code")
        table[row.code] = row
    return Catalogue(xid=xid, sxid=sxid, nvlink5=tuple(nvlink5))


@functools.cache
def catalogue() -> Catalogue:
    """The shipped catalogue, read once per process."""
    text = resources.files("providers.telemetry.kernel").joinpath("data", CATALOGUE_FILE).read_text(encoding="utf-8")
    return parse_catalogue(text)

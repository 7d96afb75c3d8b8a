"""The catalogue: NVIDIA's Xid, NVLink5 decode and NVSwitch SXid facts with the Adapter's decisions, from one CSV file.

The data is `data/xid_catalogue.csv` beside this module; its header names the sources and their versions. This module
only loads and checks it; the line-dependent decode rules it names live in `decode.py`.
"""

from __future__ import annotations

import csv
import enum
import functools
from dataclasses import dataclass
from importlib import resources

CATALOGUE_FILE = "xid_catalogue.csv"


class Points(enum.StrEnum):
    """Whom an event points at."""

    NODE = "node"
    JOB = "job"
    NOTHING = "nothing"
    #: the provider cannot tell (a code the catalogue lacks, a line it cannot decode): never a finding, and the node
    #: is not listed as unattributed
    UNKNOWN = "unknown"


#: error_category token -> severity rank; a finding carries its highest-ranked category.
CATEGORY_RANK: dict[str, int] = {
    "gpu_off_bus": 100,  # the GPU is gone from PCIe: nothing on it can run until the machine is restarted
    "gpu_memory": 90,  # uncorrectable ECC, row-remapping failure
    "nvswitch": 80,  # fatal NVSwitch SXid
    "nvlink": 70,  # NVLink errors on a GPU
    "pcie": 60,  # uncorrectable PCIe AER error
    "gpu_hardware": 50,  # other GPU hardware faults (micro-controller halt, init failure, fatal timeout)
    "gpu_firmware": 40,  # GSP (GPU System Processor) RPC timeout or error: hardware or driver
    "gpu_driver": 30,  # driver-side fault or driver verdict that needs a GPU reset or reboot
    "application": 10,  # the job's own code: points at the job, not a node
}

#: what each category indicates, for the docs and for operators reading a finding
CATEGORY_MEANING: dict[str, str] = {
    "gpu_off_bus": "a GPU fell off the PCIe bus (Xid 79 or the driver's probe-time message); hardware or platform",
    "gpu_memory": "uncorrectable GPU memory errors or a row-remapping failure; hardware",
    "nvswitch": "a fatal NVSwitch error (SXid); hardware or fabric",
    "nvlink": "a fatal NVLink error on a GPU (Xid 74, 136, 144-150, 155); hardware or interconnect",
    "pcie": "an uncorrectable PCIe AER error or a PCIe fatal timeout on the node; hardware or platform",
    "gpu_hardware": "another GPU hardware fault (micro-controller halt, init or probe failure, fatal timeout)",
    "gpu_firmware": "a GSP firmware RPC timeout or GSP error (Xid 119, 120); hardware or driver",
    "gpu_driver": "a driver-side GPU fault, or the driver's verdict that the GPU needs a reset or reboot",
    "application": "an error NVIDIA attributes to the user application (RESTART_APP codes such as Xid 13, 31)",
}

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
    text = resources.files("providers.kernel_log").joinpath("data", CATALOGUE_FILE).read_text(encoding="utf-8")
    return parse_catalogue(text)

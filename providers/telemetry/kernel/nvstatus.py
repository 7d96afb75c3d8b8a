"""NVIDIA's driver status codes (NV_STATUS) as the GPU driver prints them in `NVRM:` lines, and what each says.

Three tables beside this module, each read from NVIDIA/open-gpu-kernel-modules at tag 595.45.04 (their headers name
the files): `nv_status_codes.csv` (every code of `nvstatuscodes.h` with the decision for the node that prints it),
`nvrm_status_sites.csv` (the driver's print sites that carry a status: their format strings and which conversions
hold the status) and `rm_init_status.csv` (the init stages `RmInitAdapter failed!` names). Each site's format string
becomes one matcher (`%x` a hex number, `%d` a decimal, `%s` any text, nvstatusToString's `%s` the `<message>
[<name>]` form); a line is read only where a site's own format puts a status, so an assertion that merely names a
status in its expression (`Assertion failed: (status == NV_OK) || (status == NV_ERR_GPU_IN_FULLCHIP_RESET) @ ...`)
is no status at all. A status value the table lacks is undecided: never a finding.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources

from providers.telemetry.kernel.catalogue import CatalogueError, Points
from providers.telemetry.ranking import CATEGORY_RANK
from providers.telemetry.reading import data_rows

CODES_FILE = "nv_status_codes.csv"
SITES_FILE = "nvrm_status_sites.csv"
INIT_FILE = "rm_init_status.csv"

_DECISIONS = {"node": Points.NODE, "undecided": Points.UNKNOWN, "none": Points.NOTHING}
_KINDS = frozenset({"assert", "check", "gsp_rpc", "gsp_boot", "exclude", "init"})
#: what a site's kind says the driver was doing when it got the status
_DOING = {
    "assert": "an assertion of the driver found",
    "check": "a check of the driver found",
    "gsp_rpc": "a call between the driver and the GPU's firmware (GSP) returned",
    "gsp_boot": "starting the GPU's firmware (GSP) returned",
    "exclude": "excluding the GPU returned",
    "init": "initialising the GPU returned",
}
#: a printf conversion: flags, width, precision, length, type
_CONVERSION = re.compile(r"%[-+ #0]*(\d*)(?:\.\d+)?(?:hh|h|ll|l|z|j|t)?([diuxXscp%])")
_TYPE = {"d": r"-?\d{1,20}", "i": r"-?\d{1,20}", "u": r"\d{1,20}", "x": r"[0-9a-fA-F]{1,16}",
         "X": r"[0-9a-fA-F]{1,16}", "c": r".", "p": r"\S{1,32}", "s": r".{0,512}?"}  # fmt: skip
#: nvstatusToString's form: the code's message, then its name in brackets (or, for a value it lacks, this text)
_NAME_FORM = r"(?:.{0,256}?\[(NV_[A-Z0-9_]{1,64})\]|Unknown error code!)"
#: the `GPU<n> ` the driver puts after `NVRM: ` when it prints for a GPU
_GPU_PREFIX = re.compile(r"\bNVRM:? GPU(\d{1,3}) ")


@dataclass(frozen=True)
class StatusCode:
    name: str
    value: int
    message: str
    points: Points
    category: str | None
    meaning: str
    reason: str


@dataclass(frozen=True)
class Site:
    site: str
    file: str
    line: int
    kind: str
    format: str
    #: conversion index -> how it carries a status: `name`, `number` or `init`
    status: dict[int, str]
    #: the status a site is printed for alone (`rpcRecvPoll timedout`: NV_ERR_TIMEOUT), else None
    fixed: str | None
    pattern: re.Pattern[str]
    #: a literal piece of the format every matching line holds (looked for before the pattern is run)
    anchor: str


@dataclass(frozen=True)
class Tables:
    codes: dict[int, StatusCode]
    by_name: dict[str, StatusCode]
    sites: tuple[Site, ...]
    init: dict[int, tuple[str, str]]  # value -> (name, group)


@dataclass(frozen=True)
class StatusEvent:
    """What one `NVRM:` line's status says."""

    points: Points
    category: str | None
    label: str  # how a note names it without log text, e.g. "NV_ERR_RESET_REQUIRED"
    meaning: str  # the sentence shown before the line in a finding's evidence
    device: str | None  # `gpu0` when the line names the GPU by its index


def _rows(text: str) -> list[dict[str, str]]:
    return list(data_rows(text))


def parse_codes(text: str) -> dict[int, StatusCode]:
    codes: dict[int, StatusCode] = {}
    names: set[str] = set()
    for raw in _rows(text):
        try:
            value = int(raw["value"], 16)
            points = _DECISIONS[raw["decision"]]
        except (KeyError, ValueError) as exc:
            raise CatalogueError(f"{CODES_FILE}: bad value or decision in {raw.get('name')!r}") from exc
        category = raw["category"] or None
        if (category is not None) != (points is Points.NODE) or (category and category not in CATEGORY_RANK):
            raise CatalogueError(f"{CODES_FILE}: {raw['name']}: category {category!r} does not fit the decision")
        if value in codes or raw["name"] in names or not raw["name"].startswith("NV_") or not raw["reason"]:
            raise CatalogueError(f"{CODES_FILE}: {raw['name']}: repeated, misnamed or without a reason")
        names.add(raw["name"])
        codes[value] = StatusCode(raw["name"], value, raw["message"], points, category, raw["meaning"], raw["reason"])
    return codes


def compile_format(fmt: str, status: dict[int, str], whole: bool) -> tuple[re.Pattern[str], str]:
    """A format string as a matcher: each status conversion a named group (`n<i>` a number, `s<i>` a name, `i<i>` an
    init stage); what follows the first of them may be missing (a journal viewer cuts long lines), and the text after
    the last of them is left out unless `whole`."""
    fmt = fmt.removesuffix("\\n")
    parts: list[str] = []
    literals: list[str] = []
    position = 0
    first, last = min(status, default=-1), max(status, default=-1)
    for index, conversion in enumerate(_CONVERSION.finditer(fmt)):
        literal = fmt[position : conversion.start()]
        parts.append(re.escape(literal))
        literals.append(literal)
        width, kind, how = conversion.group(1), conversion.group(2), status.get(index)
        if kind == "%":
            parts.append("%")
        elif how == "name":
            parts.append(f"(?P<s{index}>{_NAME_FORM})")
        elif how in ("number", "init"):
            # a zero-padded width is printed in full: a line cut inside the number is not read as a smaller one
            digits = f"[0-9a-fA-F]{{{int(width)},16}}" if width else _TYPE["x"]
            parts.append(f"(?P<{how[0]}{index}>{digits if kind in 'xX' else _TYPE[kind]})")
        else:
            parts.append(_TYPE[kind])
        if index == first:
            parts.append("(?:")
        position = conversion.end()
        if index == last and not whole:
            break
    else:
        parts.append(re.escape(fmt[position:]))
        literals.append(fmt[position:])
    if first >= 0:
        parts.append(")?")
    anchor = max(literals, key=len).strip()
    if len(anchor) < 6:
        raise CatalogueError(f"{SITES_FILE}: the format {fmt!r} holds no literal long enough to look for")
    return re.compile("".join(parts)), anchor


def parse_sites(text: str, by_name: dict[str, StatusCode]) -> tuple[Site, ...]:
    sites: list[Site] = []
    for raw in _rows(text):
        status: dict[int, str] = {}
        fixed = None
        for part in raw["status"].split():
            where, _, how = part.partition(":")
            if where == "fixed":
                if how not in by_name:
                    raise CatalogueError(f"{SITES_FILE}: {raw['site']}: {how} is not a status of {CODES_FILE}")
                fixed = how
            elif how in ("name", "number", "init") and where.isdigit():
                status[int(where)] = how
            else:
                raise CatalogueError(f"{SITES_FILE}: {raw['site']}: bad status {part!r}")
        if raw["kind"] not in _KINDS or (not status) == (fixed is None):
            raise CatalogueError(f"{SITES_FILE}: {raw['site']}: bad kind, or neither conversions nor a fixed status")
        pattern, anchor = compile_format(raw["format"], status, whole=fixed is not None)
        sites.append(Site(raw["site"], raw["file"], int(raw["line"]), raw["kind"], raw["format"], status, fixed,
                          pattern, anchor))  # fmt: skip
    if not sites:
        raise CatalogueError(f"{SITES_FILE} is empty")
    return tuple(sites)


@functools.cache
def tables() -> Tables:
    """The shipped tables, read once per process."""
    data = resources.files("providers.telemetry.kernel").joinpath("data")
    codes = parse_codes(data.joinpath(CODES_FILE).read_text(encoding="utf-8"))
    by_name = {c.name: c for c in codes.values()}
    sites = parse_sites(data.joinpath(SITES_FILE).read_text(encoding="utf-8"), by_name)
    init = {int(r["value"], 16): (r["name"], r["group"]) for r in _rows(data.joinpath(INIT_FILE).read_text("utf-8"))}
    return Tables(codes, by_name, sites, init)


def _statuses(t: Tables, site: Site, m: re.Match[str]) -> list[tuple[str, StatusCode | None]]:
    """The statuses a match carries, each as the line writes it and its row (None: a value the table lacks)."""
    if site.fixed is not None:
        return [(site.fixed, t.by_name[site.fixed])]
    out: list[tuple[str, StatusCode | None]] = []
    for index, how in sorted(site.status.items()):
        if how == "number" and m.group(f"n{index}") is not None:
            value = int(m.group(f"n{index}"), 16)
            # NV_OK beside a failing status (GspRmFree's paramsStatus=0x00000000) is no status; one status printed
            # twice (paramsStatus and status) is one
            if value and all(written != f"0x{value:08x}" for written, _ in out):
                out.append((f"0x{value:08x}", t.codes.get(value)))
    if not out:  # the number was cut off the line: its name form
        for index, how in sorted(site.status.items()):
            if how == "name" and m.group(f"s{index}") is not None:
                name = m.group(f"s{index}")
                named = re.search(r"\[(NV_[A-Z0-9_]+)\]", name)
                if named is not None and named.group(1) != "NV_OK":
                    out.append((named.group(1), t.by_name.get(named.group(1))))
    return out


def decode_status(text: str, t: Tables | None = None) -> StatusEvent | None:
    """The status an `NVRM:` line prints at one of the driver's status sites, or None (no such site). Where several
    sites print the same format, the one whose function the line names is the one shown."""
    t = t or tables()
    matched: list[tuple[Site, re.Match[str]]] = []
    for site in t.sites:
        if site.anchor in text:
            m = site.pattern.search(text)
            if m is not None:
                matched.append((site, m))
    if not matched:
        return None
    site, m = next(((s, m) for s, m in matched if s.site in text), matched[0])
    gpu = _GPU_PREFIX.search(text)
    device = f"gpu{gpu.group(1)}" if gpu else None
    statuses = _statuses(t, site, m)
    if site.kind == "init":
        return _init(t, site, m, statuses, device)
    if not statuses:
        return StatusEvent(Points.NOTHING, None, "NV_OK", "", device)
    return _decided(site, statuses, device)


def _decided(site: Site, statuses: list[tuple[str, StatusCode | None]], device: str | None) -> StatusEvent:
    """The most telling status decides: a node finding over an undecided status over none."""
    known = [code for _, code in statuses if code is not None]
    node = sorted((c for c in known if c.points is Points.NODE), key=lambda c: -CATEGORY_RANK[c.category or ""])
    said = "; ".join(_said(written, code) for written, code in statuses)
    meaning = f"{_DOING[site.kind]} {said} (NVIDIA driver status, {site.site})"
    if node:
        return StatusEvent(Points.NODE, node[0].category, node[0].name, meaning, device)
    undecided = [c for c in known if c.points is Points.UNKNOWN]
    unknown = [written for written, code in statuses if code is None]
    if undecided or unknown:
        label = undecided[0].name if undecided else f"NV_STATUS {unknown[0]}"
        return StatusEvent(Points.UNKNOWN, None, label, meaning, device)
    return StatusEvent(Points.NOTHING, None, known[0].name, meaning, device)


def _said(written: str, code: StatusCode | None) -> str:
    if code is None:
        return f"{written}, a status the driver's list lacks"
    what = code.meaning or code.reason
    return f"{code.name} (0x{code.value:08x}, \"{code.message}\"): {what}"


def _init(
    t: Tables, site: Site, m: re.Match[str], statuses: list[tuple[str, StatusCode | None]], device: str | None
) -> StatusEvent:
    """RmInitAdapter failed: the GPU could not be initialised, whatever the stage and the status."""
    stage = next((int(m.group(f"i{i}"), 16) for i, how in site.status.items() if how == "init" and m.group(f"i{i}")),
                 None)  # fmt: skip
    name, group = t.init.get(stage, (f"stage 0x{stage:x}" if stage is not None else "an unknown stage", ""))
    status = "; ".join(_said(written, code) for written, code in statuses) or "no status"
    meaning = (f"the GPU could not be initialised: RmInitAdapter failed at {name}"
               + (f" ({group})" if group else "") + f" with {status} (NVIDIA driver status)")  # fmt: skip
    return StatusEvent(Points.NODE, "gpu_hardware", "RmInitAdapter failure", meaning, device)

"""The driver status catalogue both ways: every NV_STATUS code reached by lines built from each of the driver's own
print formats and decided as its row says, nothing decided that the tables lack, and real `NVRM:` lines read as
their status means (fixtures/nvrm-status-lines.csv, each line's report named)."""

from __future__ import annotations

import csv
import re
from importlib import resources
from pathlib import Path

import pytest

from providers.telemetry.kernel.catalogue import CatalogueError, Points
from providers.telemetry.kernel.nvstatus import Site, StatusCode, decode_status, parse_codes, parse_sites, tables

T = tables()
DATA = resources.files("providers.telemetry.kernel").joinpath("data")
FIXTURES = Path(__file__).parent / "fixtures"
#: a printf conversion and its length modifier (C's `%llx`, which Python's `%` does not take)
_CONVERSION = re.compile(r"%([-+ #0]*\d*(?:\.\d+)?)(?:hh|h|ll|l|z|j|t)?([diuxXscp%])")


def printf(fmt: str, values: list[object]) -> str:
    """The C format with `values`, as the driver's NV_PRINTF prints it (length modifiers dropped for Python)."""
    return _CONVERSION.sub(lambda m: "%" + m.group(1) + ("d" if m.group(2) == "u" else m.group(2)), fmt) % tuple(
        values
    )


def to_string(code: StatusCode) -> str:
    """nvstatusToString(): the message, then the name in brackets (src/common/shared/nvstatus/nvstatus.c)."""
    return f"{code.message} [{code.name}]"


def example(site: Site, code: StatusCode) -> str:
    """A kernel line the site prints for `code`: its format filled in, behind the driver's `NVRM: GPU0 <function>: `."""
    values: list[object] = []
    for index, conversion in enumerate(m for m in _CONVERSION.finditer(site.format) if m.group(2) != "%"):
        how, kind = site.status.get(index), conversion.group(2)
        if how == "name":
            values.append(to_string(code))
        elif how == "number":
            values.append(code.value)
        elif how == "init":
            values.append(0x62)
        else:
            values.append("pRmApi->Control(pRmApi, hClient)" if kind == "s" else 7)
    text = printf(site.format.removesuffix("\\n"), values)
    return f"NVRM: GPU0 {site.site}: {text}"


def test_the_tables_name_their_source_release_and_hold_every_code_once() -> None:
    header = DATA.joinpath("nv_status_codes.csv").read_text()
    assert "open-gpu-kernel-modules tag 595.45.04" in header and "nvstatuscodes.h" in header
    assert "df1c9a3de2be4b130f4fc7680f7198193d8ac6ad" in header
    assert len(T.codes) == 151 and len(T.by_name) == 151
    assert T.codes[0].name == "NV_OK" and T.by_name["NV_ERR_RESET_REQUIRED"].value == 0x62
    assert {c.name.split("_")[1] for c in T.codes.values()} == {"OK", "ERR", "WARN"}
    assert "595.45.04" in DATA.joinpath("nvrm_status_sites.csv").read_text()
    assert len(T.init) == 24 and T.init[0x62][0] == "RM_INIT_FIRMWARE_INIT_FAILED"


@pytest.mark.parametrize("site", T.sites, ids=[f"{s.site}:{s.line}" for s in T.sites])
def test_every_code_is_reached_by_each_site_and_decided_as_its_row_says(site: Site) -> None:
    for code in T.codes.values():
        if site.fixed is not None and code.name != site.fixed:
            continue
        event = decode_status(example(site, code))
        assert event is not None, (site.site, code.name)
        if site.kind == "init":  # the GPU could not be initialised, whatever the status
            assert (event.points, event.category) == (Points.NODE, "gpu_hardware")
            assert "RM_INIT_FIRMWARE_INIT_FAILED" in event.meaning
        elif code.name == "NV_OK":
            assert event.points is Points.NOTHING
        else:
            assert (event.points, event.category, event.label) == (code.points, code.category, code.name)
            assert code.name in event.meaning and event.device == "gpu0"


def test_a_status_the_table_lacks_is_undecided_and_a_cut_line_is_read_by_its_name() -> None:
    assert max(T.codes) < 0x00020000 and 0x8D not in T.codes
    line = "NVRM: GPU1 rpcRmApiAlloc_GSP: GspRmAlloc failed: hClient=0x1; hParent=0x2; hObject=0x3; hClass=0x4; " \
           "paramsSize=0x5; paramsStatus=0x0000008d; status=0x0000008d"
    event = decode_status(line)
    assert event is not None and event.points is Points.UNKNOWN and event.label == "NV_STATUS 0x0000008d"
    unknown = decode_status("NVRM: nvAssertOkFailedNoLog: Assertion failed: Unknown error code! (0x0000BEEF) returned "
                            "from status @ x.c:1")
    assert unknown is not None and unknown.points is Points.UNKNOWN
    # A number cut by a journal viewer is not read as a smaller one: the name decides, and a name the table lacks
    # decides nothing.
    cut = decode_status("NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required [NV_ERR_RESET_REQUIRED] "
                        "(0x0000006>")
    assert cut is not None and (cut.points, cut.label) == (Points.NODE, "NV_ERR_RESET_REQUIRED")
    made_up = decode_status("NVRM: nvAssertOkFailedNoLog: Assertion failed: Made up [NV_ERR_MADE_UP] (0x0000>")
    assert made_up is not None and made_up.points is Points.UNKNOWN


@pytest.mark.parametrize(
    "line",
    [
        # An assertion naming statuses in its expression, not a status it got (open-gpu-kernel-modules#1045).
        "NVRM: nvAssertFailedNoLog: Assertion failed: (status == NV_OK) || (status == NV_ERR_GPU_IN_FULLCHIP_RESET) "
        "@ rs_server.c:259",
        "NVRM: GPU0 kchangrpInit_IMPL:  Fault method buffer allocation failed for group ID 0xb with status 0x1f",
        "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  595.45.04",
        "NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    ],
)
def test_lines_that_print_no_status_at_a_status_site_are_no_status(line: str) -> None:
    assert decode_status(line) is None


def test_the_tables_are_checked_when_read() -> None:
    head = "name,value,message,decision,category,meaning,reason\n"
    with pytest.raises(CatalogueError):
        parse_codes(head + "NV_ERR_X,0x1,m,node,,meaning,why\n")  # a node decision needs a category
    with pytest.raises(CatalogueError):
        parse_codes(head + "NV_ERR_X,0x1,m,none,,,why\nNV_ERR_Y,0x1,m,none,,,why\n")  # a repeated value
    with pytest.raises(CatalogueError):
        parse_codes(head + "NV_ERR_X,0x1,m,sometimes,,,why\n")
    sites = "site,file,line,kind,format,status\n"
    with pytest.raises(CatalogueError):
        parse_sites(sites + "f,x.c,1,assert,Assertion failed: %s,0:guess\n", T.by_name)
    with pytest.raises(CatalogueError):
        parse_sites(sites + "f,x.c,1,gsp_rpc,timedout,fixed:NV_ERR_NOT_A_CODE\n", T.by_name)
    with pytest.raises(CatalogueError):
        parse_sites(sites + "f,x.c,1,gsp_rpc,%x,0:number\n", T.by_name)  # nothing literal to look for


def _real() -> list[dict[str, str]]:
    text = (FIXTURES / "nvrm-status-lines.csv").read_text()
    return list(csv.DictReader(line for line in text.splitlines() if not line.startswith("#")))


@pytest.mark.parametrize("row", _real(), ids=lambda r: r["url"].rsplit("/", 3)[-3] + "#" + r["url"].rsplit("/", 1)[-1])
def test_real_nvrm_lines_are_read_as_their_status_means(row: dict[str, str]) -> None:
    event = decode_status(row["line"])
    if row["expected"] == "-":
        assert event is None
    elif row["expected"] == "none":
        assert event is not None and event.points is Points.NOTHING
    else:
        assert event is not None and f"node {event.category}" == row["expected"]

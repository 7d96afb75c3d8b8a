"""The catalogue file and the classifier agree in both directions, and the file is what its header says."""

import re
from importlib import resources

import pytest

from providers.telemetry.kernel.catalogue import (
    CatalogueError,
    Points,
    catalogue,
    parse_catalogue,
)
from providers.telemetry.kernel.decode import RULES, decode_sxid, decode_xid
from providers.telemetry.ranking import CATEGORY_MEANING, CATEGORY_RANK

TOKEN = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
CAT = catalogue()
TEXT = resources.files("providers.telemetry.kernel").joinpath("data", "xid_catalogue.csv").read_text()
#: lines each decode rule reads as fatal (values from NVIDIA's decode; see decode.py)
FATAL_LINE = {
    "xid74_registers": "NVLink: fatal error detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    "nvlink5_decode": "UNIT Fatal XC0 i0 Link 03 (0x7fffffff 0x7fffffff 0x00000000 0x00000000)",
    "xid154_recovery_action": "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
}


def test_the_file_names_its_sources_versions_and_principle() -> None:
    header = "\n".join(line for line in TEXT.splitlines() if line.startswith("#"))
    assert "docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html" in header
    assert "2025-10-29" in header and "catalog_generated.go" in header
    assert "Fabric Manager User Guide" in header and "DU-09883-001" in header
    assert "Decision principle" in header and "Unused give no finding" in header


def test_every_xid_from_1_to_172_has_one_row() -> None:
    assert sorted(CAT.xid) == list(range(1, 173))
    assert len(CAT.sxid) >= 90 and {12028, 20034, 24007, 22003, 23001, 10003} <= set(CAT.sxid)


@pytest.mark.parametrize("code", sorted(CAT.xid))
def test_each_xid_row_classifies_as_the_file_says(code: int) -> None:
    row = CAT.xid[code]
    rest = FATAL_LINE.get(row.rule, "pid='<unknown>', name=<unknown>, text")
    decision = decode_xid(CAT, code, rest)
    assert (decision.points, decision.category) == (row.points, row.category)


@pytest.mark.parametrize("code", sorted(CAT.sxid))
def test_each_sxid_row_classifies_as_the_file_says(code: int) -> None:
    row = CAT.sxid[code]
    fatal = decode_sxid(CAT, code, "Fatal, Link 28 text")
    assert (fatal.points, fatal.category) == (row.points, row.category) == (Points.NODE, "nvswitch")
    non_fatal = decode_sxid(CAT, code, "Non-fatal, Link 28 text").points
    lone = decode_sxid(CAT, code, "Data {0x00000000, 0x00000000}").points
    if row.fatality == "always_fatal" or row.rule == "sxid_guide_impact":
        # The guide says more than the line's word: always fatal, or NVLink traffic stalls / every GPU is reset.
        assert non_fatal is lone is Points.NODE
    else:
        assert non_fatal is Points.NOTHING
        assert lone is {"potentially_fatal": Points.UNKNOWN, "non_fatal": Points.NOTHING}[row.fatality]


def test_the_sxids_the_guide_gives_more_impact_than_their_word_are_exactly_its_stalling_codes() -> None:
    # Per-code rows of the Fabric Manager guide whose impact is stalled NVLink traffic and aborted CUDA jobs (11004,
    # 12028) or a reset of every GPU and NVSwitch (19084): their lines say `Non-fatal`, the guide says more.
    guided = {code for code, row in CAT.sxid.items() if row.rule == "sxid_guide_impact"}
    assert guided == {11004, 12028, 19084}
    for code in guided:
        assert CAT.sxid[code].fatality == "non_fatal" and CAT.sxid[code].meaning.startswith("Fabric Manager")


@pytest.mark.parametrize("code", [0, 173, 174, 200, 999, 65535])
def test_the_classifier_knows_no_xid_the_file_lacks(code: int) -> None:
    assert code not in CAT.xid
    assert decode_xid(CAT, code, "pid=1, text").points is Points.UNKNOWN


@pytest.mark.parametrize("code", [11000, 26006, 26008, 28006, 99999])
def test_an_sxid_the_file_lacks_is_unknown_unless_the_line_says(code: int) -> None:
    assert code not in CAT.sxid
    assert decode_sxid(CAT, code, "SOE Watchdog error").points is Points.UNKNOWN
    assert decode_sxid(CAT, code, "Non-fatal, Link 46 MC TS crumbstore MCTO (First)").points is Points.NOTHING
    assert decode_sxid(CAT, code, "Fatal, Link 46 text").points is Points.NODE


def test_rules_named_by_the_file_are_exactly_the_decoder_rules() -> None:
    named = {r.rule for r in [*CAT.xid.values(), *CAT.sxid.values(), *CAT.nvlink5] if r.rule}
    assert named == RULES


def test_rows_are_consistent() -> None:
    for row in [*CAT.xid.values(), *CAT.sxid.values(), *CAT.nvlink5]:
        assert (row.category is None) == (row.points is Points.NOTHING)
        assert row.category is None or row.category in CATEGORY_RANK
    for category in CATEGORY_RANK:
        assert TOKEN.match(category) and category in CATEGORY_MEANING
    assert len(set(CATEGORY_RANK.values())) == len(CATEGORY_RANK)  # a strict order of severity
    # Every Unused code is no finding; every RESTART_APP code points at the job; IGNORE is never a node finding,
    # and the job's only where NVIDIA's own words give the fault to the application (the row says them).
    for row in CAT.xid.values():
        if row.description == "Unused":
            assert row.points is Points.NOTHING and row.reason or row.immediate == "IGNORE"
        if row.immediate == "RESTART_APP":
            assert row.points is Points.JOB
        if row.immediate == "IGNORE":
            assert row.points is Points.NOTHING or (row.points is Points.JOB and "application" in row.meaning)
        if row.immediate in ("RESET_GPU", "RESTART_BM", "RESTART_VM", "CHECK_MECHANICALS", "WORKFLOW_XID_48"):
            assert row.points is Points.NODE
    assert {c for c, r in CAT.xid.items() if r.immediate == "IGNORE" and r.points is Points.JOB} == {43, 137}
    assert {144, 145, 146, 147, 148, 149, 150} == {r.code for r in CAT.nvlink5}


def test_the_file_is_checked_when_read() -> None:
    header = "kind,code,name,description,immediate,investigatory,fatality,decision,category,rule,reason,meaning\n"
    with pytest.raises(CatalogueError):
        parse_catalogue(header + "xid,1,X,d,IGNORE,,,node,,,,\n")  # a node decision needs a category
    with pytest.raises(CatalogueError):
        parse_catalogue(header + "xid,1,X,d,IGNORE,,,none,,,,\nxid,1,X,d,IGNORE,,,none,,,,\n")  # a repeated code
    with pytest.raises(CatalogueError):
        parse_catalogue(header + "sxid,11004,X,d,,,sometimes,node,nvswitch,sxid_severity,,\n")

"""The classifier: each catalogue class, the line variants, and whom each event points at."""

import re
from datetime import UTC, datetime

import pytest

from providers.kernel_log.catalogue import CATEGORY_MEANING, CATEGORY_RANK, EVENTS, XID, Points, xid_entry
from providers.kernel_log.parse import Classifier, classify

TOKEN = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
T = datetime(2026, 9, 9, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("code", "category", "points"),
    [
        (48, "gpu_memory", Points.NODE),
        (63, "gpu_memory", Points.NODE),
        (64, "gpu_memory", Points.NODE),
        (92, "gpu_memory", Points.NODE),
        (94, "gpu_memory", Points.NODE),
        (95, "gpu_memory", Points.NODE),
        (74, "nvlink", Points.NODE),
        (145, "nvlink", Points.NODE),
        (79, "gpu_off_bus", Points.NODE),
        (119, "gpu_firmware", Points.NODE),
        (120, "gpu_firmware", Points.NODE),
        (46, "gpu_driver", Points.NODE),
        (62, "gpu_hardware", Points.NODE),
        (167, "pcie", Points.NODE),
        (13, "application", Points.JOB),
        (31, "application", Points.JOB),
        (43, "application", Points.JOB),
        (45, None, Points.NOTHING),
        (154, None, Points.NOTHING),
    ],
)
def test_xid_classes(code: int, category: str | None, points: Points) -> None:
    assert classify(f"NVRM: Xid (PCI:0000:07:00): {code}, pid='<unknown>', name=<unknown>, text") == (
        "xid",
        code,
        category,
        points,
    )


def test_unlisted_xid_points_at_nothing() -> None:
    assert classify("NVRM: Xid (PCI:0000:07:00): 999, something new") == ("xid", 999, None, Points.NOTHING)
    assert xid_entry(999).indicates == "unknown"


@pytest.mark.parametrize(
    "message",
    [
        "NVRM: Xid (PCI:0000:9b:00 GPU-I:1 GPU-CI:0): 48, pid=12, name=python, An uncorrectable double bit error",
        "NVRM: Xid (PCI:0000:9b:00): 48, An uncorrectable double bit error",  # no process context
        "NVRM: Xid (PCI:0000:9b:00): 48",  # bare code
        "NVRM: Xid (0000:9b:00): 48, old driver without PCI:",
    ],
)
def test_xid_line_variants(message: str) -> None:
    assert classify(message) == ("xid", 48, "gpu_memory", Points.NODE)


def test_sxid_fatal_and_non_fatal() -> None:
    fatal = "nvidia-nvswitch3: SXid (PCI:0000:c6:00.0): 12028, Fatal, Link 44 egress non-posted PRIV error"
    assert classify(fatal) == ("sxid_fatal", 12028, "nvswitch", Points.NODE)
    nonfatal = "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Non-fatal, Link 30 LTSSM Fault Up"
    assert classify(nonfatal) == ("sxid_nonfatal", 20034, None, Points.NOTHING)
    # The follow-up lines repeat the code without a severity: they are not events of their own.
    assert classify("nvidia-nvswitch3: SXid (PCI:0000:c6:00.0): 12028, Severity 1 Engine instance 44") is None


def test_fallen_off_the_bus_runtime_forms() -> None:
    assert classify("NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.")[2] == "gpu_off_bus"  # type: ignore[index]
    assert classify("NVRM: GPU at 0000:01:00.0 has fallen off the bus.")[2] == "gpu_off_bus"  # type: ignore[index]


def test_fallen_off_the_bus_probe_form_spans_three_lines() -> None:
    c = Classifier()
    lines = [
        "NVRM: The NVIDIA GPU 0000:b3:00.0",
        "NVRM: (PCI ID: 10de:26b5) installed in this system has",
        "NVRM: fallen off the bus and is not responding to commands.",
    ]
    events = [c.feed("worker-01", T, m, m) for m in lines]
    assert events[0] is None and events[1] is None
    event = events[2]
    assert event is not None and event.category == "gpu_off_bus" and event.points is Points.NODE
    assert event.line == "\n".join(lines)  # the GPU's address stays in the evidence


@pytest.mark.parametrize(
    ("message", "category"),
    [
        (
            "pcieport 0000:00:03.1: PCIe Bus Error: severity=Uncorrectable (Fatal), type=Transaction Layer, (Receiver)",
            "pcie",
        ),
        (
            "nvidia 0000:07:00.0: AER: PCIe Bus Error: severity=Uncorrectable (Non-Fatal), type=Transaction Layer",
            "pcie",
        ),
        ("pcieport 0000:00:01.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer", "pcie"),
        ("nvme 0000:0a:00.0: PCIe Bus Error: severity=Correctable, type=Physical Layer, (Receiver ID)", None),
        ("pcieport 0000:00:01.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, id=0008", None),
    ],
)
def test_pcie_aer(message: str, category: str | None) -> None:
    result = classify(message)
    assert result is not None and result[2] == category


def test_gsp_timeout_without_xid() -> None:
    msg = "NVRM: _kgspRpcRecvPoll: Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected function 103"
    assert classify(msg) == ("gsp_timeout", None, "gpu_firmware", Points.NODE)


def test_ordinary_lines_are_not_events() -> None:
    assert classify("IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready") is None
    assert classify("NVRM: GPU at PCI:0000:9b:00: GPU-6a3c5e4b-1f2d-4c7e-9a8b-2d1e0f3c4b5a") is None


def test_catalogue_is_consistent() -> None:
    categories = {e.category for e in XID.values()} | {e.category for e in EVENTS.values()}
    for category in categories - {None}:
        assert category in CATEGORY_RANK and category in CATEGORY_MEANING
    for token in CATEGORY_RANK:
        assert TOKEN.match(token)
    for entry in list(XID.values()) + list(EVENTS.values()):
        # An event that points somewhere must say in which category; one that points nowhere has none.
        assert (entry.category is None) == (entry.points is Points.NOTHING)
        assert (entry.points is Points.JOB) == (entry.category == "application")
    assert len(set(CATEGORY_RANK.values())) == len(CATEGORY_RANK)  # a strict order of severity

"""Line-dependent decode rules, pinned with lines in the drivers' real shapes (sources in decode.py and SOURCES.md)."""

import pytest

from providers.telemetry.kernel.catalogue import Points, catalogue
from providers.telemetry.kernel.decode import Decision, decode_sxid, decode_xid

CAT = catalogue()


@pytest.mark.parametrize(
    ("code", "rest", "points"),
    [
        # leptonai/gpud components/accelerator/nvidia/xid/kmsg_test.go and nvlink_logs_test.go
        (149, "NETIR_BER_EVENT Nonfatal XC0 i0 Link 03 (0x00086226 0x00000001 0x00000000 0x00000000)", Points.NOTHING),
        (144, "SAW_MVB Nonfatal XC0 i0 Link 00 (0x00000001 0x00000001 0x00000000 0x00000000)", Points.NOTHING),
        (144, "SAW_MVB Fatal XC0 i0 Link 00 (0x00000001 0x00000002 0x00000000 0x00000000)", Points.NODE),
        (145, "RLW_REMAP Nonfatal XC0 i0 Link 00 (0x00000004 0x00000001 0x00000000 0x00000000)", Points.NOTHING),
        (145, "RLW_REMAP Fatal XC0 i0 Link 00 (0x00000004 0x00000040 0x00000000 0x00000000)", Points.NODE),
        (145, "RLW_SRC_TRACK Fatal XC0 i0 Link 00 (0x00000007 0x00000001 0x00000000 0x00000000)", Points.NODE),
        (
            149,
            "NETIR_LINK_EVT/NETIR_LINK_DOWN Fatal XC0 i0 Link 00 (0x02500011 0x00000000 0x00000000 0x0)",
            Points.NODE,
        ),
        (149, "NETIR_MFDE_EVENT Nonfatal XC0 i0 Link 00 (0x00000014 0x00000003 0x00000000 0x00000000)", Points.NOTHING),
        (150, "MSE_WATCHDOG Fatal XC0 i0 Link 00 (0x00000000 0x00000000 0x00000000 0x00000000)", Points.NODE),
        # NVIDIA/TensorRT-LLM issue 4816: no registers, the word decides
        (145, "RLW_REMAP Nonfatal XC0 i0 Link 02", Points.NOTHING),
        (145, "pid=2280636, name=python3, RLW_SRC_TRACK Fatal XC0 i0 Link 03 (0x0000000f 0x0fffffff)", Points.NODE),
        (149, "Placeholder message", Points.UNKNOWN),  # neither fields nor a severity word: undecided
    ],
)
def test_nvlink5_lines(code: int, rest: str, points: Points) -> None:
    decision = decode_xid(CAT, code, rest)
    assert decision.points is points
    assert decision.category == ("nvlink" if points is Points.NODE else None)


@pytest.mark.parametrize(
    ("rest", "points"),
    [
        ("GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", Points.NODE),
        ("GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", Points.NODE),
        ("GPU recovery action changed from 0x0 (None) to 0x1 (PF FLR)", Points.NODE),
        ("GPU recovery action changed from 0x0 (None) to 0x2 (OS Reboot)", Points.NODE),
        ("GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)", Points.NODE),
        ("GPU recovery action changed from 0x4 (Drain and Reset) to 0x0 (None)", Points.NOTHING),
        ("GPU recovery action changed from 0x0 (None) to 0x2a (Something new)", Points.UNKNOWN),
        ("pid='<unknown>', name=<unknown>, text", Points.UNKNOWN),
    ],
)
def test_xid154_names_its_recovery_action(rest: str, points: Points) -> None:
    assert decode_xid(CAT, 154, rest).points is points


@pytest.mark.parametrize(
    ("registers", "points"),
    [
        ("0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0", Points.NODE),  # third register bit 16 (NVSentinel design 019)
        ("0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0", Points.NODE),  # first register bit 16 (AWS HyperPod example)
        ("0x1, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0", Points.NOTHING),  # first register bit 0: "can be safely ignored"
        ("0x0, 0x0, 0x0, 0x0, 0x100000, 0x0, 0x0", Points.NOTHING),  # fifth register bit 20: ECC threshold only
        ("0x2, 0x0, 0x0, 0x30000, 0x0, 0x0, 0x0", Points.NOTHING),  # sympathetic bits only
        ("0x2, 0x0, 0x0, 0x40000, 0x0, 0x0, 0x0", Points.NODE),  # fourth register bit 18: fabric reset needed
        ("0x0, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0", Points.NODE),  # no bit to read: the driver's "fatal" stands
    ],
)
def test_xid74_registers(registers: str, points: Points) -> None:
    rest = f"pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 14({registers})"
    assert decode_xid(CAT, 74, rest).points is points
    assert decode_xid(CAT, 74, "pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 1").points is (
        Points.NODE
    )


def test_remap_pending_and_failed_contained_and_uncontained() -> None:
    pending = "pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate."
    assert decode_xid(CAT, 63, pending).points is Points.NOTHING
    assert (decode_xid(CAT, 64, "pid=1, Row remapper failed").points, CAT.xid[64].category) == (
        Points.NODE,
        "gpu_memory",
    )
    contained = decode_xid(CAT, 94, "pid=7062, Contained: SM (0x1). RST: No, D-RST: No")
    assert (contained.points, contained.category) == (Points.JOB, "gpu_memory")
    uncontained = decode_xid(CAT, 95, "pid=7062, Uncontained: LTC TAG (0x2,0x0). RST: Yes, D-RST: No")
    assert (uncontained.points, uncontained.category) == (Points.NODE, "gpu_memory")


def test_sxid_words_and_fallback() -> None:
    # NVIDIA/NVSentinel sxid_handler_test.go lines, after the code.
    assert decode_sxid(CAT, 24007, "Fatal, Link 28 sourcetrack timeout error (First)").points is Points.NODE
    assert decode_sxid(CAT, 20009, "Non-fatal, Link 04 RX Short Error Rate").points is Points.NOTHING
    # The guide calls 12028 non-fatal; a line saying Fatal is believed (the driver decoded it).
    assert decode_sxid(CAT, 12028, "Fatal, Link 44 egress non-posted PRIV error").points is Points.NODE
    assert decode_sxid(CAT, 22003, "Minion Halt").points is Points.NODE  # always fatal, no word
    assert decode_sxid(CAT, 11009, "Data {0x0}").points is Points.UNKNOWN  # potentially fatal, no word
    assert decode_sxid(CAT, 11012, "Data {0x0}").points is Points.NOTHING  # non-fatal single-bit ECC, no word
    assert decode_sxid(CAT, 11012, "Non-fatal, Link 02 Single bit ECC").points is Points.NOTHING


def test_sxids_whose_impact_the_guide_states_beyond_their_word() -> None:
    # The Fabric Manager guide's per-code table: 12028 and 11004 stall NVLink traffic and make the GPU driver abort
    # CUDA jobs (Xid 45) though the driver writes `Non-fatal`; 19084 asks for every GPU and NVSwitch to be reset.
    lines = [
        (12028, "Non-fatal, Link 44 egress non-posted PRIV error"),
        (11004, "Non-fatal, Link 3 ingress invalid ACL"),
        (19084, "Non-fatal, Link 7 AN1 Heartbeat Timeout Error"),
        (12028, "Data {0x1c0}"),
    ]
    for code, rest in lines:
        assert decode_sxid(CAT, code, rest) == Decision(Points.NODE, "nvswitch")
    # An always-fatal code (the guide: "always fatal to the entire fabric/system") whatever the line's word.
    assert decode_sxid(CAT, 23001, "Non-fatal, Link 0 ingress SRC-VC buffer overflow").points is Points.NODE

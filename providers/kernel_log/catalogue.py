"""The kernel-log classifier catalogue: NVIDIA Xid/SXid codes and other kernel GPU events, as data.

Sources (facts only; the table below is this project's own condensed rendering of them):
- NVIDIA Xid catalogue, https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html (mnemonics,
  descriptions and "resolution buckets" such as RESTART_APP, RESET_GPU, RESTART_BM, WORKFLOW_NVLINK_ERR), as
  carried in leptonai/gpud `components/accelerator/nvidia/xid/catalog_generated.go`.
- NVIDIA "Xid Errors" listing, https://docs.nvidia.com/deploy/xid-errors/index.html#xid-error-listing (which
  codes may indicate a hardware, driver or user-application cause), as carried in leptonai/gpud
  `pkg/nvidia-query/xid/xid.go` (`PotentialHWError`, `PotentialDriverError`, `PotentialUserAppError`).
- NVIDIA/open-gpu-kernel-modules (`kernel_rc.c` Xid format, "GPU has fallen off the bus" messages, NVSwitch
  `SXid` format in `common_nvswitch.h`); Linux `drivers/pci/pcie/aer.c` (AER severities).

What "indicates" means here: the public listing's possible causes. A code NVIDIA lists as possibly caused by a
user application *and* whose first action is restarting the application points at the job as a whole; a
hardware/driver/bus code points at the node that logged it; follow-up and informational codes (45, 154) and codes
not listed below point at nothing by themselves.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Points(enum.StrEnum):
    """Whom an event points at."""

    NODE = "node"
    JOB = "job"
    NOTHING = "nothing"


#: error_category token -> severity rank; a node's finding carries its highest-ranked category.
CATEGORY_RANK: dict[str, int] = {
    "gpu_off_bus": 100,  # the GPU is gone from PCIe: nothing on it can run until the machine is restarted
    "gpu_memory": 90,  # uncorrectable ECC, row-remapping failure
    "nvswitch": 80,  # fatal NVSwitch SXid
    "nvlink": 70,  # NVLink errors on a GPU
    "pcie": 60,  # uncorrectable PCIe AER error
    "gpu_hardware": 50,  # other GPU hardware faults (micro-controller halt, init failure, fatal timeout)
    "gpu_firmware": 40,  # GSP (GPU System Processor) RPC timeout or error: hardware or driver
    "gpu_driver": 30,  # driver-side fault that needs a GPU reset or reboot
    "application": 10,  # the job's own code: points at the job, not a node
}

#: what each category indicates, for the docs and for operators reading a finding
CATEGORY_MEANING: dict[str, str] = {
    "gpu_off_bus": "a GPU fell off the PCIe bus (Xid 79 or the driver's probe-time message); hardware or platform",
    "gpu_memory": "uncorrectable or excessive GPU memory ECC errors, or a row-remapping failure; hardware",
    "nvswitch": "a fatal NVSwitch error (SXid); hardware or fabric",
    "nvlink": "an NVLink error on a GPU (Xid 74, 136, 144-150, 155); hardware or interconnect",
    "pcie": "an uncorrectable PCIe AER error or a PCIe fatal timeout on the node; hardware or platform",
    "gpu_hardware": "another GPU hardware fault (micro-controller halt, init failure, fatal timeout)",
    "gpu_firmware": "a GSP firmware RPC timeout or GSP error (Xid 119, 120); hardware or driver",
    "gpu_driver": "a driver-side GPU fault that needs a GPU reset or reboot; driver",
    "application": "an error NVIDIA attributes mainly to the user application (Xid 13, 31, 43, 69, 137)",
}


@dataclass(frozen=True)
class XidEntry:
    code: int
    name: str
    indicates: str  # the public listing's possible causes, in words: hardware, driver, user application, unknown
    category: str | None  # None: the event points at nothing by itself
    points: Points


def _x(code: int, name: str, indicates: str, category: str | None, points: Points) -> XidEntry:
    return XidEntry(code, name, indicates, category, points)


_N, _J, _0 = Points.NODE, Points.JOB, Points.NOTHING

#: NVIDIA Xid codes this provider classifies (see the module docstring for sources). Unlisted codes: nothing.
XID: dict[int, XidEntry] = {
    e.code: e
    for e in (
        _x(9, "driver error programming GPU", "driver", "gpu_driver", _N),
        _x(12, "driver error handling GPU exception", "driver", "gpu_driver", _N),
        _x(13, "graphics engine exception", "user application, driver or hardware", "application", _J),
        _x(31, "GPU memory page fault", "user application mostly; driver or hardware", "application", _J),
        _x(43, "GPU stopped processing (reset channel verification)", "user application or driver", "application", _J),
        _x(45, "preemptive cleanup due to previous errors", "follows other errors", None, _0),
        _x(46, "GPU stopped processing (GPU timeout)", "driver", "gpu_driver", _N),
        _x(48, "double-bit ECC error", "hardware", "gpu_memory", _N),
        _x(62, "internal micro-controller halt (PMU)", "hardware or driver", "gpu_hardware", _N),
        _x(63, "GPU memory remapping / page retirement event", "hardware", "gpu_memory", _N),
        _x(64, "GPU memory remapping / page retirement failure", "hardware", "gpu_memory", _N),
        _x(69, "graphics engine class error", "user application", "application", _J),
        _x(74, "NVLink error", "hardware or bus", "nvlink", _N),
        _x(79, "GPU has fallen off the bus", "hardware or bus", "gpu_off_bus", _N),
        _x(92, "high single-bit ECC error rate", "hardware", "gpu_memory", _N),
        _x(94, "contained memory (ECC) error", "hardware", "gpu_memory", _N),
        _x(95, "uncontained memory (ECC) error", "hardware", "gpu_memory", _N),
        _x(109, "context-switch timeout", "hardware, driver or user application", "gpu_driver", _N),
        _x(110, "security fault", "hardware or driver", "gpu_hardware", _N),
        _x(119, "GSP RPC timeout", "hardware or driver", "gpu_firmware", _N),
        _x(120, "GSP error", "hardware or driver", "gpu_firmware", _N),
        _x(136, "NVLink link training failed", "hardware", "nvlink", _N),
        _x(137, "NVLink privilege error", "user application", "application", _J),
        _x(140, "unrecovered ECC error", "hardware", "gpu_memory", _N),
        _x(143, "GPU initialization error", "hardware", "gpu_hardware", _N),
        _x(144, "NVLink SAW error", "hardware", "nvlink", _N),
        _x(145, "NVLink RLW error", "hardware", "nvlink", _N),
        _x(146, "NVLink TLW error", "hardware", "nvlink", _N),
        _x(147, "NVLink TREX error", "hardware", "nvlink", _N),
        _x(148, "NVLink NVLPW_CTRL error", "hardware", "nvlink", _N),
        _x(149, "NVLink NETIR error", "hardware", "nvlink", _N),
        _x(150, "NVLink MSE error", "hardware", "nvlink", _N),
        _x(154, "GPU recovery action changed", "informational, refers to another Xid", None, _0),
        _x(155, "NVLink software-defined error", "driver or hardware", "nvlink", _N),
        _x(156, "resource retirement event", "hardware", "gpu_hardware", _N),
        _x(157, "resource retirement failure", "hardware", "gpu_hardware", _N),
        _x(158, "GPU fatal timeout", "hardware", "gpu_hardware", _N),
        _x(167, "PCIe fatal timeout", "hardware or bus", "pcie", _N),
        _x(168, "reduced GPU memory capacity", "hardware", "gpu_memory", _N),
        _x(169, "internal micro-controller halt (SEC2)", "hardware or driver", "gpu_hardware", _N),
        _x(171, "uncorrectable DRAM error (detail of Xid 48)", "hardware", "gpu_memory", _N),
        _x(172, "uncorrectable SRAM error (detail of Xid 48)", "hardware", "gpu_memory", _N),
    )
}


@dataclass(frozen=True)
class EventKind:
    """A non-Xid kernel event the classifier recognises."""

    key: str
    name: str
    indicates: str
    category: str | None
    points: Points


#: kernel events recognised outside the Xid table
EVENTS: dict[str, EventKind] = {
    k.key: k
    for k in (
        EventKind("sxid_fatal", "fatal NVSwitch SXid", "hardware or fabric", "nvswitch", _N),
        # Non-fatal SXids are logged and recovered by the switch; they do not explain a job failure alone.
        EventKind("sxid_nonfatal", "non-fatal NVSwitch SXid", "hardware, recovered", None, _0),
        EventKind("gpu_off_bus", "GPU has fallen off the bus", "hardware or bus", "gpu_off_bus", _N),
        EventKind("gpu_off_bus_probe", "GPU fell off the bus at probe time", "hardware or bus", "gpu_off_bus", _N),
        EventKind("aer_uncorrectable", "uncorrectable PCIe AER error", "hardware or platform", "pcie", _N),
        # Correctable AER errors are corrected by the link itself: not failures.
        EventKind("aer_correctable", "correctable PCIe AER error", "corrected by hardware", None, _0),
        EventKind("gsp_timeout", "GSP RPC timeout", "hardware or driver", "gpu_firmware", _N),
    )
}


def xid_entry(code: int) -> XidEntry:
    """The catalogue entry for an Xid code; unlisted codes point at nothing (indicates: unknown)."""
    entry = XID.get(code)
    if entry is None:
        return XidEntry(code, "unlisted Xid", "unknown", None, Points.NOTHING)
    return entry

"""CUDA errors a rank can report, each classified from NVIDIA's CUDA Runtime API documentation.

The rows are the job-log signal table's rows parsed as `cuda` (`data/signals.csv`): each gives the runtime name
(`cudaError...`), the driver name (`CUDA_ERROR_...`) and the messages `cudaGetErrorString` / `cuGetErrorString`
return, which PyTorch prints after `CUDA error: `, NCCL after `Cuda failure '` and nccl-tests after `Test CUDA
failure <file>:<line> '`. Source of every row: NVIDIA CUDA Runtime API, "Data types used by CUDA Runtime", enum
`cudaError` (https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html), the page PyTorch itself names
in its "Search for `cudaError...' in ..." hint. `reason` says, in short, what NVIDIA's description gives as the cause;
it is why the row points where it does.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from providers.telemetry.joblog.signals import SIGNALS, Signal, SignalMeaning

SOURCE = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html"


class Meaning(enum.StrEnum):
    """Where NVIDIA's description of a CUDA error points."""

    NODE = "node"  # the GPU, its links or its driver stack: the node
    APPLICATION = "application"  # the program's own kernels, launches or memory use: the job
    UNKNOWN = "unknown"  # NVIDIA names no cause, or several: points at nothing by itself (ambiguous)


@dataclass(frozen=True)
class CudaErrorKind:
    runtime_name: str
    driver_name: str
    messages: tuple[str, ...]
    meaning: Meaning
    #: the finding category for NODE rows (the kernel catalogue's names where they overlap), else None
    category: str | None
    reason: str
    #: for UNKNOWN rows, the category the node's own kernel event would confirm (None: the event decides alone)
    if_corroborated: str | None = None


_MEANINGS = {
    SignalMeaning.NODE_HARDWARE: Meaning.NODE,
    SignalMeaning.LINK_FABRIC: Meaning.NODE,
    SignalMeaning.APPLICATION: Meaning.APPLICATION,
    SignalMeaning.AMBIGUOUS: Meaning.UNKNOWN,
    SignalMeaning.NODE_STATE: Meaning.UNKNOWN,  # a node only against the scope's other nodes, or corroborated
}


def _kind(signal: Signal) -> CudaErrorKind:
    driver = next((m for m in signal.markers if m.startswith("CUDA_ERROR_")), "")
    messages = tuple(m for m in signal.markers if m != signal.id and m != driver)
    meaning = _MEANINGS[signal.meaning]
    category = signal.category if meaning is not Meaning.UNKNOWN else None
    corroborated = signal.category if meaning is Meaning.UNKNOWN else None
    return CudaErrorKind(signal.id, driver, messages, meaning, category, signal.says, corroborated)


#: every `cuda` row of the signal table but the one for errors it does not list
KINDS: tuple[CudaErrorKind, ...] = tuple(
    _kind(s) for s in SIGNALS if s.parse == "cuda" and s.id.startswith("cudaError")
)

BY_NAME: dict[str, CudaErrorKind] = {}
for _k in KINDS:
    BY_NAME[_k.runtime_name] = _k
    BY_NAME[_k.driver_name] = _k
#: messages longest first, so that a message that prefixes another never wins over it
BY_MESSAGE: tuple[tuple[str, CudaErrorKind], ...] = tuple(
    sorted(((m, k) for k in KINDS for m in k.messages), key=lambda mk: -len(mk[0]))
)


def kind_for_message(text: str) -> CudaErrorKind | None:
    """The kind whose message `text` starts with (PyTorch may append hints after it), or None."""
    for message, kind in BY_MESSAGE:
        if text.startswith(message):
            return kind
    return None

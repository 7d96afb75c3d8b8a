"""CUDA errors a rank can report, each classified from NVIDIA's CUDA Runtime API documentation.

Source of every row: NVIDIA CUDA Runtime API, "Data types used by CUDA Runtime", enum `cudaError`
(https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html) — the page PyTorch itself names in its
"Search for `cudaError...' in ..." hint. The message column is the text `cudaGetErrorString` /
`cuGetErrorString` return, which PyTorch prints after `CUDA error: ` and NCCL after `Cuda failure '`. The reason
column says, in short, what NVIDIA's description of the code gives as its cause; it is why the row points where
it does.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

SOURCE = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html"


class Meaning(enum.StrEnum):
    """Where NVIDIA's description of a CUDA error points."""

    NODE = "node"  # the GPU, its links or its driver stack: the node
    APPLICATION = "application"  # the program's own kernels, launches or memory use: the job
    UNKNOWN = "unknown"  # NVIDIA names no cause, or several: points at nothing by itself


@dataclass(frozen=True)
class CudaErrorKind:
    runtime_name: str
    driver_name: str
    messages: tuple[str, ...]
    meaning: Meaning
    #: the finding category for NODE rows (the kernel catalogue's names where they overlap), else None
    category: str | None
    reason: str


_N, _A, _U = Meaning.NODE, Meaning.APPLICATION, Meaning.UNKNOWN

KINDS: tuple[CudaErrorKind, ...] = (
    # -- the hardware, its links or the node's driver stack
    CudaErrorKind(
        "cudaErrorECCUncorrectable", "CUDA_ERROR_ECC_UNCORRECTABLE", ("uncorrectable ECC error encountered",),
        _N, "gpu_memory", "an uncorrectable ECC error was detected while the work ran",
    ),
    CudaErrorKind(
        "cudaErrorNvlinkUncorrectable", "CUDA_ERROR_NVLINK_UNCORRECTABLE",
        ("uncorrectable NVLink error detected during the execution",),
        _N, "nvlink", "an uncorrectable NVLink error was detected while the work ran",
    ),
    CudaErrorKind(
        "cudaErrorDevicesUnavailable", "CUDA_ERROR_DEVICE_UNAVAILABLE",
        ("all CUDA-capable devices are busy or unavailable", "CUDA-capable device(s) is/are busy or unavailable"),
        _N, "gpu_unavailable",
        "the node's devices are busy or unavailable (compute mode, other work filling the GPU, memory held by "
        "active work)",
    ),
    CudaErrorKind(
        "cudaErrorNoDevice", "CUDA_ERROR_NO_DEVICE", ("no CUDA-capable device is detected",),
        _N, "gpu_unavailable", "the installed driver detected no CUDA-capable device",
    ),
    CudaErrorKind(
        "cudaErrorSystemNotReady", "CUDA_ERROR_SYSTEM_NOT_READY", ("system not yet initialized",),
        _N, "gpu_driver", "the system is not ready for CUDA work: its configuration or required driver daemons",
    ),
    CudaErrorKind(
        "cudaErrorSystemDriverMismatch", "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        ("system has unsupported display driver / cuda driver combination",),
        _N, "gpu_driver", "the display driver and the CUDA driver versions on the node do not match",
    ),
    # -- the program: its kernels, launches and memory use
    CudaErrorKind(
        "cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS", ("an illegal memory access was encountered",),
        _A, "application", "a kernel loaded or stored at an invalid memory address",
    ),
    CudaErrorKind(
        "cudaErrorAssert", "CUDA_ERROR_ASSERT", ("device-side assert triggered",),
        _A, "application", "an assert in device code triggered",
    ),
    CudaErrorKind(
        "cudaErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED", ("unspecified launch failure",),
        _A, "application",
        "an exception while a kernel ran; the common causes NVIDIA names are an invalid device pointer and "
        "out-of-bounds shared memory",
    ),
    CudaErrorKind(
        "cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY", ("out of memory",),
        _A, "application", "the call could not allocate the memory the program asked for",
    ),
    CudaErrorKind(
        "cudaErrorLaunchOutOfResources", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
        ("too many resources requested for launch",),
        _A, "application", "the launch asked for more resources (arguments, threads for its registers) than exist",
    ),
    CudaErrorKind(
        "cudaErrorHardwareStackError", "CUDA_ERROR_HARDWARE_STACK_ERROR", ("hardware stack error",),
        _A, "application", "a kernel's call stack was corrupted or exceeded the stack size limit",
    ),
    CudaErrorKind(
        "cudaErrorIllegalInstruction", "CUDA_ERROR_ILLEGAL_INSTRUCTION", ("an illegal instruction was encountered",),
        _A, "application", "a kernel executed an illegal instruction",
    ),
    CudaErrorKind(
        "cudaErrorMisalignedAddress", "CUDA_ERROR_MISALIGNED_ADDRESS", ("misaligned address",),
        _A, "application", "a kernel loaded or stored at a misaligned address",
    ),
    CudaErrorKind(
        "cudaErrorInvalidAddressSpace", "CUDA_ERROR_INVALID_ADDRESS_SPACE",
        ("operation not supported on global/shared address space",),
        _A, "application", "a kernel used an address outside the address space its instruction allows",
    ),
    CudaErrorKind(
        "cudaErrorInvalidPc", "CUDA_ERROR_INVALID_PC", ("invalid program counter",),
        _A, "application", "a kernel reached an invalid program counter",
    ),
    CudaErrorKind(
        "cudaErrorNoKernelImageForDevice", "CUDA_ERROR_NO_BINARY_FOR_GPU",
        ("no kernel image is available for execution on the device",),
        _A, "application", "the program was built without code for this device",
    ),
    # -- no single cause
    CudaErrorKind(
        "cudaErrorUnknown", "CUDA_ERROR_UNKNOWN", ("unknown error",),
        _U, None, "an unknown internal error: NVIDIA names no cause",
    ),
    CudaErrorKind(
        "cudaErrorContained", "CUDA_ERROR_CONTAINED",
        ("Invalid access of peer GPU memory over nvlink or a hardware error",),
        _U, None, "contained by the GPU: NVIDIA names both invalid peer accesses and hardware errors",
    ),
    CudaErrorKind(
        "cudaErrorLaunchTimeout", "CUDA_ERROR_LAUNCH_TIMEOUT", ("the launch timed out and was terminated",),
        _U, None, "a kernel ran past the device's execution timeout",
    ),
    CudaErrorKind(
        "cudaErrorInitializationError", "CUDA_ERROR_NOT_INITIALIZED", ("initialization error",),
        _U, None, "the CUDA driver and runtime could not be initialised",
    ),
)

BY_NAME: dict[str, CudaErrorKind] = {}
for _kind in KINDS:
    BY_NAME[_kind.runtime_name] = _kind
    BY_NAME[_kind.driver_name] = _kind
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

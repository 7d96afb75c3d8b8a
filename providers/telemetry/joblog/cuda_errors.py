"""CUDA errors a rank can report, each classified from NVIDIA's description of its code, and the reader of the lines
that print them.

The kinds are the `cuda` rows of `data/cuda.csv`: every runtime `cudaError_t` code of CUDA 13.5 with the driver's
`CUresult` code of the same value and meaning, and the three driver codes the runtime lacks; each gives the names,
the value and the messages `cudaGetErrorString` / `cuGetErrorString` return. cuBLAS's `cublasStatus_t` and cuDNN's
`cudnnStatus_t` codes are kinds too: PyTorch prints them as the CUDA error of a library call (`CUDA error:
CUBLAS_STATUS_X when calling ...`, `cuDNN error: CUDNN_STATUS_X`), always by name. The lines that print a CUDA error are
that file's `cuda_context` rows and NCCL's `Cuda failure` rows of `data/nccl.csv`: each has a format whose `code`
field holds the error (its message, its name or its number). `reason` says, in short, what NVIDIA's description gives
as the cause; it is why the kind points where it does.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass

import re2

from providers.telemetry.digits import signed_number
from providers.telemetry.joblog.formats import compile_format
from providers.telemetry.joblog.signals import CUDA_CONTEXT, SIGNALS, Signal, SignalMeaning

SOURCE = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html"
#: the catalogues of CUDA's codes (the rest of the `cuda` rows are lines that print one)
CODE_CATALOGUES = frozenset({"cudaError_t", "CUresult", "cublasStatus_t", "cudnnStatus_t"})
#: the catalogues whose numbers a CUDA line prints (`cuda runtime error (2)`): the libraries' numbers are never read
NUMBERED = frozenset({"cudaError_t", "CUresult"})
#: characters of a CUDA error's text kept when no row names it
MAX_TEXT = 512


class Meaning(enum.StrEnum):
    """Where NVIDIA's description of a CUDA error points."""

    NODE = "node"  # the GPU, its links or its driver stack: the node
    APPLICATION = "application"  # the program's own kernels, launches or memory use: the job
    UNKNOWN = "unknown"  # NVIDIA names no cause, or several, or one a comparison across nodes decides


@dataclass(frozen=True)
class CudaErrorKind:
    #: the row's id: the runtime's name, or the driver's for the three codes the runtime lacks
    runtime_name: str
    driver_name: str
    messages: tuple[str, ...]
    meaning: Meaning
    #: the finding category for NODE rows (the kernel catalogue's names where they overlap), else None
    category: str | None
    reason: str
    #: for UNKNOWN rows, the category the node's own kernel event would confirm (None: the event decides alone)
    if_corroborated: str | None = None
    #: the row's meaning as the signal table states it (a node's state, the job's configuration, ...)
    signal_meaning: SignalMeaning = SignalMeaning.AMBIGUOUS
    value: int | None = None
    #: the enum the code belongs to (`cudaError_t`, `CUresult`, `cublasStatus_t`, `cudnnStatus_t`)
    catalogue: str = "cudaError_t"


_MEANINGS = {
    SignalMeaning.NODE_HARDWARE: Meaning.NODE,
    SignalMeaning.LINK_FABRIC: Meaning.NODE,
    SignalMeaning.APPLICATION: Meaning.APPLICATION,
}
_NAME_PREFIXES = ("cuda", "CUDA_", "CUBLAS_STATUS_", "CUDNN_STATUS_")


def _kind(signal: Signal) -> CudaErrorKind:
    names = [m for m in signal.markers if m.startswith(_NAME_PREFIXES) and " " not in m]
    driver = next((m for m in names if m.startswith("CUDA_")), "")
    # the messages are the markers that are not names: context-only ones (a short message counts only beside a CUDA
    # context), and standalone ones that name their code wherever they stand (`no CUDA-capable device is detected`,
    # and PyTorch's `CUDA out of memory`, its allocator's words for the same code)
    messages = tuple(m for m in signal.markers if m not in names)
    meaning = _MEANINGS.get(signal.meaning, Meaning.UNKNOWN)
    category = signal.category if meaning is not Meaning.UNKNOWN else None
    corroborated = signal.category if meaning is Meaning.UNKNOWN else None
    value = int(signal.value) if signal.value.lstrip("-").isdigit() else None
    return CudaErrorKind(signal.id, driver, messages, meaning, category, signal.says, corroborated, signal.meaning,
                         value, signal.catalogue)


#: every CUDA code of the table
KINDS: tuple[CudaErrorKind, ...] = tuple(
    _kind(s) for s in SIGNALS if s.parse == "cuda" and s.catalogue in CODE_CATALOGUES
)
BY_ID: dict[str, CudaErrorKind] = {k.runtime_name: k for k in KINDS}
#: a code's names -> its kind; the success values are left out: on a failure line they are what a check expected
BY_NAME: dict[str, CudaErrorKind] = {}
for _k in KINDS:
    if _k.value == 0:
        continue
    BY_NAME[_k.runtime_name] = _k
    if _k.driver_name:
        BY_NAME[_k.driver_name] = _k
#: the success values' names: read only as a code field's whole text (a check that printed its expected value)
SUCCESS_NAMES: dict[str, CudaErrorKind] = {
    name: k for k in KINDS if k.value == 0 for name in (k.runtime_name, k.driver_name) if name
}
#: a CUDA code's value -> its kind (the runtime's first: the driver's numbers mostly repeat them)
BY_VALUE: dict[int, CudaErrorKind] = {}
for _k in KINDS:
    if _k.value is not None and _k.catalogue in NUMBERED:
        BY_VALUE.setdefault(_k.value, _k)
#: messages longest first, so that a message that prefixes another never wins over it
BY_MESSAGE: tuple[tuple[str, CudaErrorKind], ...] = tuple(
    sorted(((m, k) for k in KINDS for m in k.messages), key=lambda mk: -len(mk[0]))
)
_MESSAGES = {m: k for m, k in reversed(BY_MESSAGE)}
#: the rows of lines that print a CUDA error, with a format whose `code` field holds it
CONTEXT_ROWS: tuple[Signal, ...] = tuple(
    s for s in SIGNALS if s.parse == "cuda" and s.catalogue not in CODE_CATALOGUES and s.format and s.code == "cuda"
)


def kind_for_message(text: str) -> CudaErrorKind | None:
    """The kind whose message `text` starts with (PyTorch may append hints after it), or None."""
    text = text.strip()
    found = _MESSAGES.get(text)
    if found is not None:
        return found
    for message, kind in BY_MESSAGE:
        if text.startswith(message):
            return kind
    return None


def kind_for_code(text: str) -> CudaErrorKind | None:
    """The kind a code field's text names: a message, a name or a number."""
    text = text.strip().strip("'\"")
    if not text:
        return None
    if text in BY_NAME:
        return BY_NAME[text]
    if text in SUCCESS_NAMES:
        return SUCCESS_NAMES[text]
    if text.lstrip("-").isdigit():  # a number: the kind of that value, when it is one
        value = signed_number(text, 12)
        return None if value is None else BY_VALUE.get(value)
    return kind_for_message(text)


@functools.cache
def _names() -> re2._Regexp:  # type: ignore[name-defined]
    """Every code's names as one alternation (longest first: a name that prefixes another never wins)."""
    names = sorted(BY_NAME, key=lambda n: (-len(n), n))
    return re2.compile("|".join(re2.escape(n) for n in names))


@functools.cache
def _matchers() -> tuple[tuple[Signal, re2._Regexp, int], ...]:  # type: ignore[name-defined]
    """Each context row with its compiled format and the group of its `code` field."""
    out = []
    for row in CONTEXT_ROWS:
        compiled = compile_format(row.format, row.fields)
        out.append((row, re2.compile(compiled.pattern), compiled.fields.index("code")))
    return tuple(out)


def cuda_error_in(text: str) -> tuple[CudaErrorKind | None, str] | None:
    """(kind or None, the error text) of the CUDA error a line reports, or None when it reports none.

    A line reports one when it holds a CUDA context marker (the standalone markers of the `cuda` rows: a name's
    prefix, `CUDA error: `, NCCL's `Cuda failure `, `CUDA out of memory`, ...). The kind is the first of: a code's name
    the line holds (PyTorch's hint, a framework's `CUDA_ERROR_X`); the code field of a context row's format (its
    message, name or number); the longest listed message after the first context marker. A CUDA error none of these
    name is returned with kind None.
    """
    starts = [pos for pos in (text.find(m) for m in CUDA_CONTEXT) if pos >= 0]
    if not starts:
        return None
    named = _names().search(text)
    if named is not None:
        return BY_NAME[named.group(0)], named.group(0)
    unknown = None
    for row, pattern, group in _matchers():
        if not any(m in text for m in row.markers):
            continue
        m = pattern.search(text)
        if m is None:
            continue
        code = m.group(f"c{group}") or ""
        kind = kind_for_code(code)
        if kind is not None:
            return kind, code.strip()
        unknown = unknown or code.strip()
    rest = text[min(starts) :]
    for message, kind in BY_MESSAGE:
        if message in rest:
            return kind, message
    return None, (unknown or rest)[:MAX_TEXT].strip()


def is_cuda_text(text: str) -> bool:
    """Whether `text` holds a CUDA context marker."""
    return any(marker in text for marker in CUDA_CONTEXT)

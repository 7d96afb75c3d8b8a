"""Each catalogue holds its source's codes and messages whole, and nothing its source lacks.

CUDA is compared with the enums of `cuda-bindings` (requirements-dev pins the release the catalogue was read from):
every `cudaError_t` and `CUresult` member is a row with its value, every row's names are members, and every runtime
row's first message is `cudaGetErrorString`'s (the runtime bundled with the bindings answers without a GPU). The
signal names srun prints are compared with the C library's `strsignal`. NCCL's, Slurm's, the verbs library's,
cuBLAS's and cuDNN's sets are checked against what their files' headers state was read (cuBLAS's and cuDNN's wheels
are hundreds of MiB: their names and values are stated here as their headers give them; NCCL's sources are not
installable here: the release mirror they were read from is named in the header). That every row is reached by its
own example, and every code inside the lines that carry it, is `test_signals.py`'s.
"""

from __future__ import annotations

import signal

from cuda.bindings import driver, runtime

from providers.telemetry.joblog import cuda_errors
from providers.telemetry.joblog.signals import BY_ID, SIGNALS, read_file


def _rows(catalogue: str) -> list:
    return [s for s in SIGNALS if s.catalogue == catalogue]


def test_every_cuda_runtime_code_is_a_row_and_every_row_a_code() -> None:
    enum = {name: int(member) for name, member in runtime.cudaError_t.__members__.items()}
    rows = {k.runtime_name: k.value for k in cuda_errors.KINDS if BY_ID[k.runtime_name].catalogue == "cudaError_t"}
    assert rows == enum


def test_every_cuda_driver_code_is_a_row_and_every_row_a_code() -> None:
    enum = {name: int(member) for name, member in driver.CUresult.__members__.items()}
    rows = {k.driver_name: k.value for k in cuda_errors.KINDS if k.driver_name}
    assert rows == enum


def test_every_cuda_runtime_row_prints_the_runtime_s_own_message() -> None:
    members = runtime.cudaError_t.__members__
    for kind in cuda_errors.KINDS:
        if kind.runtime_name in members:
            err, message = runtime.cudaGetErrorString(members[kind.runtime_name])
            assert int(err) == 0 and message.decode() == kind.messages[0], kind.runtime_name


def test_every_cuda_code_is_classified_and_the_context_rows_carry_cuda_codes() -> None:
    for kind in cuda_errors.KINDS:
        assert kind.reason and kind.signal_meaning is BY_ID[kind.runtime_name].meaning
    assert all(row.code == "cuda" for row in cuda_errors.CONTEXT_ROWS)
    assert {row.catalogue for row in cuda_errors.CONTEXT_ROWS} >= {"cuda_context", "nccl_warn"}


def test_every_signal_srun_can_print_is_a_row_with_the_c_library_s_text() -> None:
    rows = {row.id: row for row in _rows("strsignal")}
    assert set(rows) == {s.name for s in signal.Signals if not s.name.startswith("SIGRT")}
    for name, row in rows.items():
        sig = signal.Signals[name]
        assert row.value == str(sig.value) and row.markers == (name, signal.strsignal(sig))


def test_nccl_s_results_and_format_strings_are_the_counts_its_header_states() -> None:
    header = [line for line in read_file("nccl.csv").splitlines() if line.startswith("# count: ")]
    stated = {line.split()[2]: int(line.split()[3]) for line in header}
    warnings = _rows("nccl_warn") + _rows("nccl_info")
    counted = {release: sum(1 for row in warnings if row.release == release) for release in stated}
    assert counted == stated and stated["v2.30.7-1"] == 629  # 629 distinct strings at 725 call sites of v2.30.7-1
    assert len(warnings) == sum(stated.values())
    assert len({row.format for row in warnings if row.release == "v2.30.7-1"}) == 629
    results = {row.id: int(row.value) for row in _rows("ncclResult_t")}
    assert results == {
        "ncclSuccess": 0, "ncclUnhandledCudaError": 1, "ncclSystemError": 2, "ncclInternalError": 3,
        "ncclInvalidArgument": 4, "ncclInvalidUsage": 5, "ncclRemoteError": 6, "ncclInProgress": 7, "ncclTimeout": 8,
        "ncclNumResults": 9,
    }


def test_the_verbs_library_s_enums_are_whole() -> None:
    assert sorted(int(r.value) for r in _rows("ibv_wc_status")) == list(range(24))
    assert sorted(int(r.value) for r in _rows("ibv_event_type")) == list(range(21))
    assert all(r.id.startswith(("IBV_WC_", "IBV_EVENT_")) for r in _rows("ibv_wc_status") + _rows("ibv_event_type"))


def test_slurm_s_strerror_table_is_whole() -> None:
    rows = _rows("slurm_errno")
    assert len(rows) == 375 and len({r.id for r in rows}) == 375
    assert {"SLURM_SUCCESS", "ESLURM_NODES_BUSY", "ESLURMD_PROLOG_FAILED", "ESLURM_JOB_TIMEOUT_KILLED"} <= {
        r.id for r in rows}
    assert all(r.file.startswith("src/common/slurm_errno.c:") and r.release == "slurm-26-05-3-1" for r in rows)


#: cublasStatus_t as nvidia/cu13/include/cublas_api.h of nvidia-cublas==13.1.1.3 defines it
CUBLAS = {"CUBLAS_STATUS_SUCCESS": 0, "CUBLAS_STATUS_NOT_INITIALIZED": 1, "CUBLAS_STATUS_ALLOC_FAILED": 3,
          "CUBLAS_STATUS_INVALID_VALUE": 7, "CUBLAS_STATUS_ARCH_MISMATCH": 8, "CUBLAS_STATUS_MAPPING_ERROR": 11,
          "CUBLAS_STATUS_EXECUTION_FAILED": 13, "CUBLAS_STATUS_INTERNAL_ERROR": 14, "CUBLAS_STATUS_NOT_SUPPORTED": 15,
          "CUBLAS_STATUS_LICENSE_ERROR": 16}
#: cuDNN 8.9's cudnnStatus_t (cudnn_ops_infer.h): every name is still one of cuDNN 9's, five as deprecated aliases
CUDNN_8 = ("SUCCESS", "NOT_INITIALIZED", "ALLOC_FAILED", "BAD_PARAM", "INTERNAL_ERROR", "INVALID_VALUE",
           "ARCH_MISMATCH", "MAPPING_ERROR", "EXECUTION_FAILED", "NOT_SUPPORTED", "LICENSE_ERROR",
           "RUNTIME_PREREQUISITE_MISSING", "RUNTIME_IN_PROGRESS", "RUNTIME_FP_OVERFLOW", "VERSION_MISMATCH")


def test_cublas_s_and_cudnn_s_statuses_are_whole_and_each_a_kind_read_from_pytorch_s_line() -> None:
    header = [line for line in read_file("cuda.csv").splitlines() if line.startswith("# count: ")]
    stated = {line.split()[2]: int(line.split()[3]) for line in header}
    for catalogue, count in stated.items():
        assert len(_rows(catalogue)) == count, catalogue
    assert {r.id: int(r.value) for r in _rows("cublasStatus_t")} == CUBLAS
    cudnn = {r.id: int(r.value) for r in _rows("cudnnStatus_t")}
    assert {f"CUDNN_STATUS_{n}" for n in CUDNN_8} <= set(cudnn) and len(cudnn) == stated["cudnnStatus_t"] == 54
    # cuDNN 9's codes: a category in the thousands, the specific error below it (CUDNN_STATUS_CATEGORY)
    assert {v // 1000 for v in cudnn.values()} == {0, 1, 2, 3, 4, 5}
    for row in _rows("cublasStatus_t") + _rows("cudnnStatus_t"):
        kind = cuda_errors.kind_for_code(row.id)
        assert kind is not None and kind.runtime_name == row.id and kind.catalogue == row.catalogue
        assert cuda_errors.cuda_error_in(row.example)[0] is kind, row.id
    # a library's numbers are never read as CUDA's: `cuda runtime error (3)` is cudaErrorInitializationError
    assert cuda_errors.BY_VALUE[3].runtime_name == "cudaErrorInitializationError"


def test_a_cuda_message_that_names_its_code_is_read_wherever_it_stands_and_a_short_one_only_in_a_cuda_context() -> None:
    from providers.telemetry.joblog.lines import parse_lines
    from providers.telemetry.joblog.nodes import exact_resolver

    def kinds(line: str) -> list[str]:
        log = parse_lines("node-a", [line], exact_resolver(["node-a"]))
        return [e.kind.runtime_name for e in log.cuda if e.kind is not None]

    # a site health check and Cray's GTL print CUDA's message after an API name of their own
    assert kinds("ERROR: cudaGetDeviceCount CUDA driver version is insufficient for CUDA runtime version") == [
        "cudaErrorInsufficientDriver"]
    assert kinds("GTL_DEBUG: [0] cudaHostRegister: no CUDA-capable device is detected") == ["cudaErrorNoDevice"]
    # a short message is any program's words without a CUDA context, and CUDA's beside one
    assert kinds("loader: out of memory while reading the shard list") == []
    assert kinds("RuntimeError: CUDA error: out of memory") == ["cudaErrorMemoryAllocation"]

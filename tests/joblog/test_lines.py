"""Line parsing: the real formats of PyTorch 2.x, NCCL and torchelastic, under the prefixes collectors add."""

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.telemetry.joblog import cuda_errors
from providers.telemetry.joblog.cuda_errors import Meaning
from providers.telemetry.joblog.lines import NodeParser
from providers.telemetry.joblog.patterns import (
    CRI,
    CRI_HOST,
    IB_COMPLETION,
    MARKER,
    PREFIX_SCAN,
    STAMP,
    classify_exception,
    oom_killed_pid,
)
from providers.telemetry.joblog.records import ExceptionKind, GroupRank, NetworkKind
from providers.telemetry.joblog.signals import SignalMeaning
from tests.joblog import fixtures as fx
from tests.joblog.support import T0, cri, parse

# ---------------------------------------------------------------- ranks and process-group markers


def test_global_rank_prefix_places_the_rank_even_behind_an_unknown_prefix() -> None:
    log = parse(fx.LLAMAFACTORY_7396)
    assert set(log.ranks) == {0, 3, 4}
    assert not log.ranks[0].marker_only
    assert log.ranks[0].last.text == fx.LLAMAFACTORY_7396[2] and log.ranks[0].last.number == 3


def test_markers_of_every_pytorch_version_are_read() -> None:
    by_line = {
        fx.LLAMAFACTORY_7396[1]: GroupRank(None, 4),  # [Rank 4]
        fx.LLAMAFACTORY_7396[3]: GroupRank("1", 3),  # [PG 1 Rank 3]
        fx.BASICSR_737[1]: GroupRank("0", 1),  # [PG ID 0 PG GUID 0(default_pg) Rank 1]
        fx.MILABENCH_269: GroupRank("0", 3),  # [PG 0 (default_pg) Rank 3]
        fx.FASTVIDEO_1008_LAUNCH: GroupRank("5", 1),  # [PG ID 5 PG GUID 55(mesh_replicate) Rank 1]
    }
    for line, group in by_line.items():
        log = parse([line])
        records = [*log.timeouts, *log.progress, *log.cuda]
        assert records and records[0].group == group, line
    assert GroupRank("0", 1).default_group and not GroupRank("1", 1).default_group


@pytest.mark.parametrize(("marker", "group"), [
    ("[PG 3 (a Rank 9 group) Rank 5]", GroupRank("3", 5, "a Rank 9 group")),  # `Rank ` inside the group's name
    ("[Rank \u0663]", GroupRank(None, 3)),  # a rank in other decimal digits, as the pattern reads them
    ("[Rank \u00b2]", None),  # a superscript is no decimal digit
    ("[Rank 1234567890]", None),  # more digits than a rank has
    ("[PG ID 1 PG GUID 7(mesh) Rank 12]", GroupRank("1", 12, "7(mesh)")),
    ("[PG Rank 3]", None),
])
def test_a_marker_is_read_by_its_whole_text(marker: str, group: GroupRank | None) -> None:
    # the part before a marker's rank is read once for all ranks; what a marker names is what its whole text says
    log = parse([f"[rank2]:[E909 17:59:58.414640000 ProcessGroupNCCL.cpp:616] {marker} Watchdog caught collective "
                 "operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
                 "ran for 600067 milliseconds before timing out."])
    assert log.timeouts[0].group == group
    if group is not None:
        assert log.timeouts[0].group.identity == group.identity


def test_a_default_group_marker_places_a_rank_without_prefix_but_another_group_does_not() -> None:
    # The C++ runtime's `what():` line has no `[rankN]:`; its marker names rank 5 of process group 3, which is not
    # a global rank, so it places nothing.
    log = parse([fx.SGLANG_1693_WHAT])
    assert log.timeouts[0].rank is None and log.timeouts[0].group == GroupRank("3", 5)
    assert log.ranks == {}
    old = parse(fx.OFA_271)  # PyTorch < 2.2: `[Rank N]` alone
    assert set(old.ranks) == {1, 2, 3} and all(s.marker_only for s in old.ranks.values())


# ---------------------------------------------------------------- watchdog timeouts and progress


def test_watchdog_timeout_fields() -> None:
    t = parse(fx.LLAMAFACTORY_7396).timeouts[1]
    assert (t.rank, t.seq, t.op, t.timeout_ms, t.ran_ms) == (4, 1580, "ALLREDUCE", 600000, 600067)
    assert parse([fx.YOLOV5_4409]).timeouts[0].seq is None  # PyTorch 1.9 printed no SeqNum
    nested = parse(fx.NCCL_1504).timeouts[0]  # inside "Process group watchdog thread terminated with exception"
    assert (nested.rank, nested.seq, nested.op, nested.group) == (1, 1, "COALESCED", GroupRank("0", 1))


def test_progress_lines_in_all_four_shapes() -> None:
    detected = parse(fx.LLAMAFACTORY_7396).progress
    assert [(p.rank, p.work, p.last_enqueued, p.last_completed) for p in detected] == [
        (0, 1580, 1582, 1579), (3, 1580, 1582, 1579)
    ]
    timeout_at = parse(fx.LLAMAFACTORY_6269).progress
    assert {(p.rank, p.work, p.last_enqueued, p.last_completed) for p in timeout_at} == {
        (0, 7753, 7755, 7752), (4, 7753, 7755, 7752), (2, 7753, 7755, 7752), (6, 7753, 7755, 7752)
    }
    status = parse(fx.CL_MVSNET_14).progress
    assert [(p.work, p.last_enqueued, p.last_completed) for p in status] == [(716, 747, 715), (None, 747, 715)]
    assert parse(fx.NCCL_1504).progress[0].last_completed == -1


def test_desync_report_names_lagging_ranks_of_the_reporters_group() -> None:
    log = parse(fx.PYTORCH_152623_DESYNC)
    assert len(log.desync) == 1
    report = log.desync[0]
    assert report.lagging == (7,) and report.reporter == 0 and report.group == GroupRank("0", 0)
    # The snapshot lines ("[7] finished ALLREDUCE", "[0, 1, 2] started ALLREDUCE") are not lagging statements.
    cut = parse(fx.PYTORCH_152623_DESYNC[:-1])  # no marked line after the report: its group stays unknown
    assert cut.desync[0].group is None
    missing = [*fx.PYTORCH_152623_DESYNC[:2], fx.TRACEUTILS_MISSING_RANKS, fx.PYTORCH_152623_DESYNC[-1]]
    assert [(d.lagging, d.group) for d in parse(missing).desync] == [((47,), GroupRank("0", 0))]


# ---------------------------------------------------------------- torchelastic's summary


def test_root_cause_with_sigkill() -> None:
    (f,) = parse(fx.CPPO_6_SIGKILL, nodes=[fx.CPPO_6_HOST], node=fx.CPPO_6_HOST).failures
    assert f.root and (f.rank, f.local_rank, f.exitcode, f.pid, f.signal) == (0, 0, -9, 14750, "SIGKILL")
    assert f.host == fx.CPPO_6_HOST and f.host_node == fx.CPPO_6_HOST
    assert f.time_text == "2025-05-21_15:43:03" and f.reported_at is None  # torchelastic's own time has no zone
    assert f.traceback_exception is None


def test_root_cause_global_rank_differs_from_local_rank_and_host_outside_scope_names_no_node() -> None:
    (f,) = parse(fx.ACCELERATE_2960_SIGABRT, node="other-node").failures
    assert (f.rank, f.local_rank, f.exitcode, f.signal) == (10, 2, -6, "SIGABRT")
    assert f.host == fx.ACCELERATE_2960_HOST and f.host_node is None


def test_other_failures_entries_are_not_root_causes() -> None:
    failures = parse(fx.VLMEVALKIT_1131_OTHERS).failures
    assert [(f.root, f.rank, f.pid) for f in failures] == [(False, 1, 32051), (False, 3, 32053)]


def test_exit_code_without_traceback_and_a_traceback_in_the_summary() -> None:
    (f,) = parse(fx.UNSLOTH_4_EXIT1).failures
    assert (f.exitcode, f.signal, f.traceback_exception) == (1, None, None)
    (g,) = parse(fx.PYTORCH_66182_TRACEBACK_HEAD).failures
    assert g.exitcode == 1 and g.traceback_exception is None  # the sample stops before its exception line


def test_summary_under_cri_prefixes_gets_the_collectors_time() -> None:
    lines = [cri(line, at=T0) for line in fx.CPPO_6_SIGKILL]
    (f,) = parse(lines).failures
    assert f.pid == 14750 and f.reported_at == T0


def test_launcher_traceback_and_summary_head() -> None:
    log = parse(fx.ROBOMAMBA_10_LAUNCHER)
    assert [t.kind for t in log.tracebacks] == [ExceptionKind.LAUNCHER]
    assert log.failures == ()  # no entry was printed yet


# ---------------------------------------------------------------- NCCL network warnings


def test_ib_completion_errors_name_host_peer_and_status() -> None:
    (err,) = parse(fx.NCCL_1405_IB).network  # the NCCL INFO lines after it are not warnings
    assert (err.kind, err.host, err.peer, err.status, err.peer_node) == (
        NetworkKind.IB_COMPLETION, "kp-ddp-worker-0", "10.216.210.236<54862>", 12, None
    )
    old = parse(fx.NCCL_928_IB).network
    assert [(e.host, e.peer, e.status) for e in old] == [
        ("H100-2", "fe80::966d:ae03:8b:df78%ib0<53249>", 4), ("H100-1", "fe80::966d:ae03:8b:df50%ib0<44413>", 4)
    ]
    m = IB_COMPLETION.match(fx.NCCL_1664_IBP_MESSAGE)  # the plugin's NET/IBP spelling
    assert m and m.group("status") == "12" and m.group("peer") == "7.6.13.83<36315>"


def test_socket_errors_name_the_peer_and_match_it_to_a_scope_node_by_whole_name() -> None:
    errs = parse(fx.NCCL_TESTS_166, node="ubuntu", nodes=["ubuntu", "node1"]).network
    assert [(e.kind, e.peer, e.peer_node) for e in errs] == [
        (NetworkKind.CONNECT, "10.0.0.2<45763>", None),
        (NetworkKind.PEER_CLOSED, "node1<57557>", "node1"),
    ]
    assert parse(fx.NCCL_TESTS_166, node="ubuntu", nodes=["ubuntu", "node"]).network[1].peer_node is None
    (reset, _) = [*parse(fx.NCCL_629).network, None]
    assert reset is not None and (reset.kind, reset.peer) == (NetworkKind.PEER_CLOSED, "11.127.49.2<36048>")
    (verbs,) = parse([fx.NCCL_562_VERBS]).network
    assert (verbs.kind, verbs.host, verbs.peer) == (NetworkKind.VERBS_CALL, "hai-a100-3", None)


# ---------------------------------------------------------------- CUDA errors


@pytest.mark.parametrize(
    ("line", "name", "meaning"),
    [
        (fx.JADE_194_ECC[0], "cudaErrorECCUncorrectable", Meaning.NODE),
        (fx.OSTRIS_470_ECC, "cudaErrorECCUncorrectable", Meaning.NODE),
        (fx.NNUNET_1519_NVLINK, "cudaErrorNvlinkUncorrectable", Meaning.NODE),
        (fx.PYTORCH_58155_NVLINK_WHAT, "cudaErrorNvlinkUncorrectable", Meaning.NODE),
        (fx.DEVICES_UNAVAILABLE[0], "cudaErrorDevicesUnavailable", Meaning.UNKNOWN),
        (fx.DEVICES_UNAVAILABLE[1], "cudaErrorDevicesUnavailable", Meaning.UNKNOWN),
        (fx.FASTVIDEO_1008_LAUNCH, "cudaErrorLaunchFailure", Meaning.APPLICATION),
        (fx.FLUX_40_ILLEGAL, "cudaErrorIllegalAddress", Meaning.APPLICATION),
        (fx.VLLM_4108_ILLEGAL, "cudaErrorIllegalAddress", Meaning.APPLICATION),
        (fx.NCCL_629[1], "cudaErrorIllegalAddress", Meaning.APPLICATION),
        (fx.NANOGPT_470_ASSERT, "cudaErrorAssert", Meaning.APPLICATION),
        (fx.PYTORCH_16417_OOM, "cudaErrorMemoryAllocation", Meaning.APPLICATION),
        (fx.WAN2GP_442_UNKNOWN, "cudaErrorUnknown", Meaning.UNKNOWN),
    ],
)
def test_cuda_errors_are_classified_from_nvidias_documentation(line: str, name: str, meaning: Meaning) -> None:
    (err,) = parse([line]).cuda
    assert err.kind is not None and err.kind.runtime_name == name and err.kind.meaning is meaning


def test_cuda_error_the_table_does_not_know_and_the_lines_around_a_cuda_error() -> None:
    # A driver older than the runtime: a node's state (CUDA 13.5's catalogue holds the code; it once did not).
    (err,) = parse([fx.NUNIF_702_DRIVER]).cuda
    assert err.kind is not None and err.kind.runtime_name == "cudaErrorInsufficientDriver"
    assert err.kind.signal_meaning is SignalMeaning.NODE_STATE
    (err,) = parse(["RuntimeError: CUDA error: a message no CUDA release printed"]).cuda
    assert err.kind is None and err.text == "a message no CUDA release printed"
    # PyTorch's hint lines ("CUDA kernel errors might be ...", "CUDA_LAUNCH_BLOCKING=1") report nothing more.
    assert len(parse(fx.JADE_194_ECC).cuda) == 1
    assert parse([fx.FASTVIDEO_1008_LAUNCH]).cuda[0].rank == 9


def test_every_table_row_cites_nvidias_page_and_names_resolve() -> None:
    assert cuda_errors.SOURCE.startswith("https://docs.nvidia.com/cuda/cuda-runtime-api/")
    for kind in cuda_errors.KINDS:
        if kind.value != 0:  # a success value names no error: a failed check printed it as what it expected
            assert cuda_errors.BY_NAME[kind.runtime_name] is kind
            assert not kind.driver_name or cuda_errors.BY_NAME[kind.driver_name] is kind
        assert (kind.category is None) == (kind.meaning is Meaning.UNKNOWN) or kind.meaning is Meaning.APPLICATION
        for message in kind.messages:
            # two codes print `device kernel image is invalid`; both are the program's
            found = cuda_errors.kind_for_message(message)
            assert found is not None and found.meaning is kind.meaning


# ---------------------------------------------------------------- Python tracebacks


def test_unprefixed_application_traceback() -> None:
    (t,) = parse(fx.INSTRUCTLAB_217_TRACEBACK).tracebacks
    assert t.rank is None and t.kind is ExceptionKind.APPLICATION
    assert t.exception == "ValueError: Oops! Hit a crazy error!"
    assert t.last_frame == 'File "/home/ec2-user/training/test-error.py", line 4, in recurse_and_error'


def test_rank_prefixed_tracebacks_are_followed_per_rank() -> None:
    (app,) = parse(fx.MMM_AURORA_RANK0).tracebacks
    assert (app.rank, app.kind, app.exception) == (
        0, ExceptionKind.APPLICATION, "AssertionError: Torch not compiled with CUDA enabled"
    )
    (comm,) = parse(fx.VLLM_10453_RANK1).tracebacks
    assert comm.rank == 1 and comm.kind is ExceptionKind.COMMUNICATION
    # Two ranks' lines interleaved: each traceback still ends at its own rank's exception line.
    mixed = [line for pair in zip(fx.MMM_AURORA_RANK0, fx.VLLM_10453_RANK1, strict=False) for line in pair]
    mixed += fx.MMM_AURORA_RANK0[len(fx.VLLM_10453_RANK1) :] + fx.VLLM_10453_RANK1[len(fx.MMM_AURORA_RANK0) :]
    assert {(t.rank, t.kind) for t in parse(mixed).tracebacks} == {
        (0, ExceptionKind.APPLICATION), (1, ExceptionKind.COMMUNICATION)
    }


def test_interleaved_unprefixed_tracebacks_never_invent_an_exception() -> None:
    assert parse(fx.INSIGHTFACE_2163_INTERLEAVED).tracebacks == ()


def test_exception_classes() -> None:
    assert classify_exception(fx.VLLM_10453_RANK1[6].removeprefix("[rank1]: ")) is ExceptionKind.COMMUNICATION
    assert classify_exception(fx.NANOGPT_470_ASSERT) is ExceptionKind.CUDA
    assert classify_exception(fx.ROBOMAMBA_10_LAUNCHER[7]) is ExceptionKind.LAUNCHER
    assert classify_exception(fx.INSTRUCTLAB_217_TRACEBACK[-1]) is ExceptionKind.APPLICATION


# ---------------------------------------------------------------- collector prefixes and untidy bytes


def test_cri_lines_with_and_without_a_host_and_their_times() -> None:
    plain = parse([cri(fx.LLAMAFACTORY_7396[1].removeprefix("[80747] "))])
    host = parse([cri(fx.LLAMAFACTORY_7396[1].removeprefix("[80747] "), host="worker-7", stream="stdout")])
    for log in (plain, host):
        (t,) = log.timeouts
        assert t.rank == 4 and t.line.observed_at == T0
    # A collector that writes the host after the time: `2024-03-21T02:07:08.414Z host stdout F [rank4]:...`
    line = fx.LLAMAFACTORY_7396[1].removeprefix("[80747] ")
    (t,) = parse(["2024-03-21T02:07:08.414Z host stdout F " + line]).timeouts
    assert t.rank == 4 and t.line.observed_at == datetime(2024, 3, 21, 2, 7, 8, 414000, tzinfo=UTC)


def test_a_collectors_time_and_host_of_this_node_are_taken_off_so_blocks_still_read() -> None:
    node = fx.CPPO_6_HOST
    for prefix in ("2025-05-21T15:43:03.101Z " + node + " ", node + ": "):
        (f,) = parse([prefix + line for line in fx.CPPO_6_SIGKILL], node=node).failures
        assert (f.rank, f.signal) == (0, "SIGKILL")
    # Another host's name is not this node's prefix: the block is not read as this node's.
    assert parse(["other-host: " + line for line in fx.CPPO_6_SIGKILL], node=node).failures == ()


def test_cri_partial_lines_are_joined() -> None:
    line = fx.LLAMAFACTORY_7396[3].removeprefix("[80749] ")
    at = cri(line[:70]).replace(" F ", " P ", 1)
    (p,) = parse([at, cri(line[70:])]).progress
    assert (p.rank, p.last_completed) == (3, 1579)


def test_docker_json_lines_and_other_stamped_lines() -> None:
    line = fx.BASICSR_737[1]
    record = json.dumps({"log": line + "\n", "stream": "stderr", "time": "2025-06-26T06:24:44.906457629Z"})
    (p,) = parse([record]).progress
    assert p.rank == 1 and p.line.observed_at == datetime(2025, 6, 26, 6, 24, 44, 906457, tzinfo=UTC)
    (q,) = parse(["2025-06-26T08:24:44.906+02:00 stderr " + line]).progress
    assert q.line.observed_at == datetime(2025, 6, 26, 6, 24, 44, 906000, tzinfo=UTC)
    (r,) = parse(["2025-06-26T06:24:44.906 " + line]).progress  # no zone: the time is not used
    assert r.rank == 1 and r.line.observed_at is None
    (s,) = parse(["  3: " + line]).progress  # srun --label
    assert s.rank == 1


def test_crlf_nul_escapes_and_replacement_characters() -> None:
    line = fx.LLAMAFACTORY_6269[1]
    dirty = "\x1b[31m" + line[:40] + "\x00\x00" + line[40:] + "\x1b[0m\r"
    (p,) = parse([dirty]).progress
    assert p.line.text == line and p.last_completed == 7752
    (q,) = parse([line.replace("timeout)", "timeout\ufffd)") + "\x07"]).progress  # invalid UTF-8 decoded, a BEL
    assert q.line.text.endswith("\ufffd") and q.last_completed == 7752


# ---------------------------------------------------------------- the kernel side's OOM lines


def test_oom_killed_pid_from_kernel_messages() -> None:
    assert oom_killed_pid(fx.ERT_7797_OOM) == 1440763
    assert oom_killed_pid(fx.REPORTPORTAL_203_CGROUP) == 63214
    assert oom_killed_pid(fx.KUBERNETES_56891_OLD[0]) is None  # the victim chosen, not yet killed
    assert oom_killed_pid(fx.KUBERNETES_56891_OLD[1]) == 28438
    assert oom_killed_pid(fx.QACONV_19_SUMMARY) is None
    assert oom_killed_pid("") is None


def _marker_by_search(body: str) -> tuple[str | None, int, str | None] | None:
    """The first `[PG ` or `[Rank ` within the scanned prefix, matched where it starts (what `_marker` must agree
    with, whatever it keeps between lines)."""
    starts = [pos for pos in (body.find(n, 0, PREFIX_SCAN) for n in ("[PG ", "[Rank ")) if pos >= 0]
    m = MARKER.match(body, min(starts)) if starts else None
    return (m.group("pg"), int(m.group("rank")), m.group("guid") or m.group("name")) if m else None


_MARKER_PARTS = st.one_of(
    st.sampled_from(["[", "]", "[PG ", "PG ", "ID ", " PG GUID ", "GUID ", "[Rank ", "Rank ", " (", ")", " ", "x",
                     "(default_pg)", "0", "17", "123456789", "1234567890"]),
    st.integers(0, 140).map(lambda n: "g" * n),  # a group's GUID or name, up to past its 128-character bound
    st.integers(0, 600).map(lambda n: "." * n),  # text before the marker, up to past PREFIX_SCAN
)


@settings(max_examples=600, deadline=None)
@given(st.lists(_MARKER_PARTS, max_size=14).map("".join))
def test_the_process_group_marker_is_the_first_one_matched_where_it_starts(body: str) -> None:
    group = NodeParser._marker(body)
    assert (None if group is None else (group.pg, group.rank, group.identity)) == _marker_by_search(body)


@pytest.mark.parametrize("marker", [
    f"[PG ID 123456789 PG GUID {'g' * 128} Rank 123456789]",
    f"[PG 123456789 ({'n' * 128}) Rank 123456789]",
])
def test_the_longest_markers_are_read(marker: str) -> None:
    group = NodeParser._marker(f"{'.' * 300}{marker} Watchdog caught collective operation timeout")
    assert group is not None and group.rank == 123456789 and group.pg == "123456789"
    assert group.identity in (f"{'g' * 128}", f"{'n' * 128}")


def _collector_prefix_by_patterns(text: str) -> tuple[str, str, str] | None:
    """(kind, content, stream) of a line by trying CRI, then CRI with a host, then a bare collector time (the order
    the parser must agree with)."""
    for kind, pattern in (("cri", CRI), ("cri", CRI_HOST)):
        m = pattern.match(text)
        if m:
            return kind + m.group("flag"), text[m.end() :], m.group("stream")
    m = STAMP.match(text)
    return ("stamp", text[m.end() :], "") if m else None


_TIMES = st.sampled_from(["2024-03-21T02:07:08.414640780Z", "2024-03-21 02:07:08,5+01:00", "2024-03-21T02:07:08",
                          "2024-03-21T02:07:08Z", "2", "20240321"])
_PREFIX_PARTS = st.one_of(
    st.sampled_from([" ", "stdout", "stderr", "F", "P", "host-1", "x", "\t", "stdout F", "stderr P ", " stdout ",
                     " stderr stdout F ", " stdout stderr P "]),
    st.integers(0, 300).map(lambda n: "h" * n),  # a host up to past its 253-character bound
)


@settings(max_examples=600, deadline=None)
@given(st.tuples(_TIMES, st.lists(_PREFIX_PARTS, max_size=8).map("".join)).map(lambda t: f"{t[0]}{t[1]} [rank3]: hi"))
def test_collector_prefixes_are_read_as_their_patterns_say(text: str) -> None:
    expected = _collector_prefix_by_patterns(text)
    split = NodeParser("n", lambda name: None)._split(text)
    if expected is None or expected[0] == "stamp":
        assert split is not None and split[0] == text
        assert (split[2] is not None) == (expected is not None)
        if expected is not None:
            assert split[1] == expected[1]
    elif expected[0] == "criP":
        assert split is None  # a partial line waits for the rest of its stream
    else:
        assert split == (text, expected[1], split[2]) and split[2] is not None
        assert split[2].group("date") == STAMP.match(text).group("date")


def test_a_cri_line_with_the_longest_time_and_host_is_read_and_a_longer_host_is_not_cri() -> None:
    stamp = "2024-03-21T02:07:08.414640780+01:00"  # 35 characters, the longest time a collector writes
    parser = NodeParser("n", lambda name: None)
    longest = parser._split(f"{stamp} {'h' * 253} stdout F [rank3]: hello")
    assert longest is not None and longest[1] == "[rank3]: hello"
    assert parser._split(f"{stamp} {'h' * 253} stderr P [rank3]: hel") is None  # a partial line: held back
    longer = parser._split(f"{stamp} {'h' * 254} stdout F [rank3]: hello")
    assert longer is not None and longer[1] == f"{'h' * 254} stdout F [rank3]: hello"
    for host in ("stdout", "stderr"):  # a host named like a stream is still a host
        named = parser._split(f"{stamp} {host} stdout F [rank3]: hello")
        assert named is not None and named[1] == "[rank3]: hello"

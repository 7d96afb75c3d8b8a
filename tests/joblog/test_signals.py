"""The signal table and the reader agree in both directions, and every file of the table is what its header says.

Every row the reader looks for is reached by its example line in every shape a log puts it in (bare, behind a
collector's time and a `[rankN]:` prefix, behind the node's own host name, behind srun's `--label`, inside an
exception's message); a row whose markers are taken out of the line is not reached, and lines that hold no marker
make no record at all; every code of a code catalogue is read inside the lines of the rows that carry it. The other
direction, that the readers look for no word and read no code the table lacks, is pinned at the end. The catalogues'
completeness against their sources is `test_catalogues.py`'s.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from providers.telemetry.joblog import cuda_errors, lines, messages, network
from providers.telemetry.joblog.formats import example_line
from providers.telemetry.joblog.lines import parse_lines
from providers.telemetry.joblog.nodes import exact_resolver
from providers.telemetry.joblog.records import ExceptionKind, NodeLog
from providers.telemetry.joblog.signals import (
    ANCHORS,
    BY_ID,
    CATALOGUE_COLUMNS,
    CUDA_CONTEXT,
    MARKERS,
    ORDINARY_FILE,
    SEARCHED,
    SIGNAL_FILES,
    SIGNALS,
    SLURM_STYLE,
    STANDALONE,
    VALUES,
    SignalMeaning,
    SignalTableError,
    anchors_for,
    markers_in,
    ordinary_text,
    parse_signals,
    read_file,
)
from providers.telemetry.ranking import CATEGORY_RANK
from providers.telemetry.reading import data_rows
from tests.joblog import fixtures as fx

DOCS = Path(__file__).resolve().parents[2] / "docs" / "job-logs.md"
NODE = "node-a"
#: the lines that carry each structural kind's example (an exception row's example is the last line of a traceback,
#: torchelastic's the heading of a summary whose entry follows, PyTorch's `Last error:` quote the line after it)
WRAP = {
    "exception": lambda ex: ["Traceback (most recent call last):", '  File "train.py", line 88, in <module>', ex],
    "elastic": lambda ex: [line if "Root Cause" not in line else ex for line in fx.UNSLOTH_4_EXIT1],
}
LAST_ERROR_WRAP = {"torch_nccl_last_error": lambda ex: ["ncclUnhandledCudaError: Call to CUDA function failed.",
                                                        "Last error:", ex]}
#: the shapes a log puts a line in: (name, prefix of each line)
SHAPES = (
    ("bare", ""),
    ("collector time and rank prefix", "2025-06-26T06:24:44.906457629Z stderr F [rank3]:"),
    ("the node's own host", f"{NODE}: "),
    ("srun --label", "  3: "),
    ("a collector's time before srun's label", "2025-06-26T06:24:44.906Z stdout 12: "),
)
#: launchers and schedulers print their own lines, never behind a rank or inside an exception
NO_RANK = frozenset({"elastic", "desync"})
INSIDE_EXCEPTION = frozenset({"cuda", "nccl_result", "text", "nccl", "nccl_net"})


def _lines(row_id: str) -> list[str]:
    row = BY_ID[row_id]
    if row_id in LAST_ERROR_WRAP:
        return LAST_ERROR_WRAP[row_id](row.example)
    return WRAP.get(row.parse, lambda ex: [ex])(row.example)


def _parse(lines_: list[str]) -> NodeLog:
    return parse_lines(NODE, lines_, exact_resolver([NODE, "node-b"]))


def reached(log: NodeLog) -> set[str]:
    """The signal table rows a parsed log holds records of (a message's row and the row of the code it carries)."""
    ids = {hit.signal for hit in log.signals} | {hit.format for hit in log.signals if hit.format}
    ids |= {hit.code for hit in log.signals if hit.code}
    ids |= {e.kind.runtime_name if e.kind is not None else "cuda_error_unlisted" for e in log.cuda}
    ids |= {e.kind.value for e in log.network} | {e.signal for e in log.network if e.signal}
    ids |= {e.format for e in log.network if e.format}
    ids |= {"torch_watchdog_timeout" for _ in log.timeouts}
    ids |= {"torch_watchdog_progress" for _ in log.progress}
    ids |= {"torch_desync_report" for _ in log.desync}
    ids |= {"torchelastic_root_cause" for f in log.failures if f.root}
    ids |= {"python_application_exception" for t in log.tracebacks if t.kind is ExceptionKind.APPLICATION}
    return ids


def _reaches(row_id: str, log: NodeLog) -> bool:
    row = BY_ID[row_id]
    if row.parse == "cuda" and row.catalogue not in cuda_errors.CODE_CATALOGUES:
        return bool(log.cuda)  # a line printing a CUDA error: its code's row decides
    if row.parse == "last_error":
        return bool(reached(log) - {row_id})  # the quoted warning's row
    return row_id in reached(log)


def _without(lines_: list[str], markers: tuple[str, ...]) -> list[str]:
    """The lines with each of `markers` broken by a character inserted after its first one."""
    out = []
    for line in lines_:
        for marker in sorted(markers, key=len, reverse=True):
            line = line.replace(marker, marker[0] + "\u00b7" + marker[1:])
        out.append(line)
    return out


def test_every_row_is_reached_by_its_example_in_every_shape_a_log_puts_it() -> None:
    missed = []
    for row in SEARCHED:
        example = _lines(row.id)
        shapes = [s for s in SHAPES if row.parse not in NO_RANK or not s[1]]
        for name, prefix in shapes:
            if not _reaches(row.id, _parse([prefix + line for line in example])):
                missed.append((row.id, name))
        if row.parse in INSIDE_EXCEPTION and row.catalogue not in SLURM_STYLE:
            wrapped = [f"[rank1]: RuntimeError: {line}" for line in example]
            if not _reaches(row.id, _parse(wrapped)):
                missed.append((row.id, "inside an exception"))
    assert missed == []


def test_every_nccl_row_is_reached_in_each_release_s_line_shape_and_as_pytorch_and_xla_quote_it() -> None:
    missed = []
    for row in SEARCHED:
        if row.catalogue != "nccl_warn" or row.parse in ("cuda",):
            continue
        message = row.example.split(" NCCL WARN ", 1)[1]
        shapes = {
            "2.25 and before": f"node-b:2345:2389 [2] transport/x.cc:12 NCCL WARN {message}",
            "2.26 (a time first)": f"[2025-04-06 22:31:56] node-b:2345:2389 [2] transport/x.cc:12 NCCL WARN {message}",
            "2.30 (the function)": f"node-b:2345:2389 [2] transport/x.cc:12 (ncclFn) NCCL WARN {message}",
            "XLA's quote": f"INTERNAL: NCCL operation ncclAllReduce failed: internal error. Last NCCL warning(error) "
            f"log entry (may be unrelated) '{message}'.",
        }
        for name, line in shapes.items():
            if not _reaches(row.id, _parse([f"[rank2]:{line}"])):
                missed.append((row.id, name))
        quoted = _parse(["[rank2]:ncclInternalError: Internal check failed.", "[rank2]:Last error:",
                         "[rank0]:a line of another rank", f"[rank2]:{message}"])
        if not _reaches(row.id, quoted):
            missed.append((row.id, "PyTorch's Last error:"))
    assert missed == []


def test_a_warning_s_prefix_names_its_host_and_gpu() -> None:
    row = BY_ID["nccl_no_socket_interface"]
    log = _parse(["[2025-04-06 22:31:56] node-b:2345:2389 [5] bootstrap.cc:126 NCCL WARN Bootstrap : no socket "
                  "interface found"])
    (hit,) = [h for h in log.signals if h.signal == row.id]
    assert (hit.host, hit.node, hit.device) == ("node-b", "node-b", 5)


def test_every_code_is_read_inside_the_lines_of_the_rows_that_carry_it() -> None:
    carriers: dict[str, list] = {}
    for row in SEARCHED:
        if row.code and row.code in VALUES and row.format:
            carriers.setdefault(row.code, []).append(row)
    missed = []
    for row in SIGNALS:
        if row.parse != "value":
            continue
        assert row.catalogue in carriers, row.catalogue  # every code catalogue is read by some row
        for text in (*row.markers, row.value):
            if text and text != "0" and not any(_reads(c, text, row.id) for c in carriers[row.catalogue]):
                missed.append((row.id, text))
    assert missed == []


def _reads(carrier, text: str, code: str) -> bool:  # noqa: ANN001
    message = example_line(carrier.format, carrier.fields, {"code": text}, slurm=carrier.catalogue in SLURM_STYLE)
    line = f"node-b:2345:2389 [2] x.cc:1 NCCL WARN {message}" if carrier.parse.startswith("nccl") else message
    log = _parse([line])
    found = {h.code for h in log.signals} | {e.code for e in log.network} | {e.signal for e in log.network}
    # a few codes print the same text as another (Slurm's ESLURM_HTTP_UNSUPPORTED_EXPECT): that text reads as the first
    return code in found or any(BY_ID[f].markers[1:] == BY_ID[code].markers[1:] for f in found if f in BY_ID)


def test_a_code_that_decides_gives_the_line_its_meaning() -> None:
    log = _parse(["node-b:1:2 [0] transport/net_ib/common.cc:179 NCCL WARN NET/IB : mlx5_0:1 Got non-fatal async "
                  "event: port error(10)"])
    assert [(e.kind.value, e.signal) for e in log.network] == [("nccl_ib_async_port_event", "IBV_EVENT_PORT_ERR")]
    log = _parse(["node-b:1:2 [0] transport/net_ib/common.cc:179 NCCL WARN NET/IB : mlx5_0:1 Got non-fatal async "
                  "event: port active(9)"])
    assert log.network == () and [h.signal for h in log.signals] == ["IBV_EVENT_PORT_ACTIVE"]
    (hit,) = _parse(["srun: error: Unable to create step for job 42: Requested nodes are busy"]).signals
    assert (hit.signal, hit.format, hit.code) == ("ESLURM_NODES_BUSY", "srun_step_create_failed", "ESLURM_NODES_BUSY")
    assert BY_ID[hit.signal].meaning is SignalMeaning.SCHEDULER
    (hit,) = _parse(["srun: error: gpu-17: tasks 0-3: Killed"]).signals
    assert (hit.signal, hit.host, hit.node, hit.ranks, hit.code) == ("srun_task_signal", "gpu-17", None,
                                                                     (0, 1, 2, 3), "SIGKILL")


@pytest.mark.parametrize("row_id", ["srun_task_exit", "nccl_no_socket_interface", "cudaErrorECCUncorrectable",
                                    "ompi_proc_aborted_strsignal", "torch_watchdog_timeout"])
def test_a_row_whose_markers_are_broken_is_not_reached(row_id: str) -> None:
    row = BY_ID[row_id]
    assert _reaches(row_id, _parse(_lines(row_id)))
    assert not _reaches(row_id, _parse(_without(_lines(row_id), row.markers)))


def test_no_row_is_reached_once_its_markers_are_broken_and_no_marker_means_no_record() -> None:
    reachable = []
    records = []
    for row in SEARCHED:
        if row.parse == "last_error" or (row.parse == "cuda" and row.catalogue not in cuda_errors.CODE_CATALOGUES):
            continue  # a quote or a context: what it holds is another row's
        example = _lines(row.id)
        if _reaches(row.id, _parse(_without(example, row.markers))):
            reachable.append(row.id)
        log = _parse(_without(example, MARKERS))
        if reached(log) or log.signals or log.cuda or log.network:
            records.append(row.id)
    assert (reachable, records) == ([], [])


def test_ordinary_training_lines_hold_no_marker() -> None:
    ordinary = [
        "[rank3]:[I1016 03:33:45.317536384 trainer.py:568] step 1234 loss 2.3455 lr 1e-4 grad_norm 0.13",
        "node1:12345:12345 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] via P2P/IPC/read",
        "node1:12345:12345 [0] NCCL INFO comm 0x55d1 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0",
        "{'loss': 0.9042, 'learning_rate': 0.00029342138051333165, 'epoch': 0.24}",
        "srun: job 4242 queued and waiting for resources",
        fx.NCCL_1405_IB[1],
    ]
    assert [markers_in(line) for line in ordinary] == [()] * len(ordinary)
    assert reached(_parse(ordinary)) == set()


def test_every_marker_a_line_may_hold_by_itself_holds_an_anchor() -> None:
    assert all(any(a in m for a in ANCHORS) for m in STANDALONE)
    context_only = {m for s in SEARCHED for m in s.context_only}
    assert set(STANDALONE) | context_only == set(MARKERS)
    assert anchors_for(["abc"]) == ("abc",)


def _nccl_info_lines() -> list[str]:
    """Each INFO format string of NCCL's source that no row reads as its own, printed as NCCL prints it."""
    own = {s.format for s in SIGNALS if s.format}
    rows = data_rows(read_file(ORDINARY_FILE))
    return [f"node1:4242:4242 [3] NCCL INFO {example_line(r['format'])}" for r in rows if r["format"] not in own]


def test_nccl_s_ordinary_info_lines_hold_no_anchor() -> None:
    """The anchors filter a backend's lines (Loki's `|~`): the INFO lines NCCL_DEBUG=INFO prints all along, which say
    nothing about a failure, hold none of them unless they hold a marker of the table."""
    lines_ = _nccl_info_lines()
    header = [line for line in read_file(ORDINARY_FILE).splitlines() if line.startswith("# count: ")]
    assert len(lines_) > 700 and header and int(header[0].removeprefix("# count: ")) >= len(lines_)
    passing = [line for line in lines_ if not markers_in(line) and any(a in line for a in ANCHORS)]
    assert passing == []
    assert all(any(a in m for a in ANCHORS) for m in STANDALONE)


def test_an_anchor_is_never_a_piece_of_ordinary_text_but_a_marker_may_be_its_own() -> None:
    ordinary = "comm 0x1 rank 0 - Init COMPLETE\nConnected all rings"
    # `Init` alone would be the best piece of the first marker; it is a piece of the ordinary text
    chosen = anchors_for(["profiler not Initialized", "Connected all rings"], ordinary)
    assert "Connected all rings" in chosen and not any(a in ordinary for a in chosen if a != "Connected all rings")
    assert all(any(a in m for a in chosen) for m in ["profiler not Initialized", "Connected all rings"])
    assert "Init" in anchors_for(["profiler not Initialized"])  # without ordinary text, a capital's piece wins
    # a lower-case word that several markers share (`step`) is in most English text: eight characters of each are not
    slurm = ["Job step aborted", "Timed out waiting for job step to complete", "io error and missing step on node"]
    assert "step" not in anchors_for(slurm) and all(any(a in m for a in anchors_for(slurm)) for m in slurm)
    assert not any(a in "[rank3]: {'loss': 2.06, 'step': 3}" for a in ANCHORS)
    text = ordinary_text(SIGNALS)
    assert "Init COMPLETE" in text and not any(a in text for a in ANCHORS if a not in STANDALONE)


def test_a_context_only_marker_counts_only_beside_its_context() -> None:
    assert markers_in("CPU out of memory") == () and markers_in("RuntimeError: unknown error") == ()
    assert "out of memory" in markers_in("NCCL WARN Cuda failure 'out of memory'")
    assert "Cuda failure " in CUDA_CONTEXT and "cudaError" in CUDA_CONTEXT
    # an NCCL result's short text of older releases, only beside an NCCL error's context
    assert markers_in("ValueError: invalid argument") == ()
    wrapped = "NCCL error in: ProcessGroupNCCL.cpp:825, invalid argument, NCCL version 2.7.8"
    assert "invalid argument" in markers_in(wrapped)


def test_rows_are_consistent_with_the_ranking_and_name_their_sources() -> None:
    for row in SIGNALS:
        assert row.category is None or row.category in CATEGORY_RANK
        assert row.meaning.names_node <= (row.category is not None)
        assert (row.meaning is SignalMeaning.APPLICATION) == (row.category == "application")
        assert "https://" in row.source, row.id
        assert row.says and row.never
    meanings = {row.meaning for row in SIGNALS}
    assert meanings == set(SignalMeaning)


def test_the_structural_file_s_header_states_the_principle_and_the_columns() -> None:
    text = read_file("signals.csv")
    header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    assert "Decision principle" in header and "corroboration" in header
    for column in ("id", "parse", "meaning", "category", "markers", "says", "never", "example", "source"):
        assert f"- {column}:" in header


def test_every_catalogue_file_names_its_sources_and_every_row_its_release_and_file() -> None:
    for name in SIGNAL_FILES[1:]:
        header = [line for line in read_file(name).splitlines() if line.startswith("# source:")]
        assert header and all("release" in line and "commit" in line for line in header), name
    for row in SIGNALS:
        if row.origin != "signals.csv":
            assert row.release and row.file and row.catalogue, row.id


def test_docs_list_every_catalogue_with_its_source_and_release_and_every_structural_row() -> None:
    docs = DOCS.read_text()
    for name in SIGNAL_FILES:
        assert f"`{name}`" in docs, name
    for row in SIGNALS:
        if row.origin == "signals.csv":
            assert f"`{row.id}`" in docs, row.id
        else:
            assert f"`{row.catalogue}`" in docs, row.catalogue
    for release in {r.release.split(" ")[0] for r in SIGNALS if r.release.startswith(("v", "slurm-", "CUDA"))}:
        assert release in docs, release


def test_the_readers_look_for_no_word_the_table_lacks() -> None:
    """Every text the readers search a line for is a marker or a format's literal of a row (or a line shape of the
    stack itself: NCCL's level words, PyTorch's quote)."""
    literals = set(MARKERS)
    for row in SIGNALS:
        literals.update(p for p in row.format.replace("\\n", "\n").split("%") if p)
    known = " ".join(sorted(literals))
    for module in (network, messages, cuda_errors, lines):
        source = Path(module.__file__).read_text()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue  # a docstring
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("find", "startswith") and node.args:
                word = node.args[0]
                if isinstance(word, ast.Constant) and isinstance(word.value, str) and len(word.value) > 3:
                    assert word.value.strip() in known or word.value in _STACK_SHAPES, (module.__name__, word.value)
    for word in (messages.NCCL_WARN.strip(), messages.XLA_QUOTE, lines.LAST_ERROR):
        assert word in MARKERS


#: line shapes the readers find that belong to the stack, not to a catalogue: NCCL's prefix and levels, collector and
#: launcher prefixes, PyTorch's traceback and process-group markers, torchelastic's summary
_STACK_SHAPES = frozenset({
    "NCCL ", "NCCL INFO ", "[rank", "[PG ", "[Rank ", "Traceback (most recent call last):", "Traceback", "Failures:",
    "Root Cause", "File \"", '{"log":', "Timeout(ms)=", "To our best knowledge, ranks [",
    "failure detected by watchdog at work sequence id: ", "detected by watchdog at work: ", "Timeout at NCCL work: ",
    "Last enqueued NCCL work: ", "Watchdog caught collective operation timeout", " stdout ", " stderr ", "F ", "P ",
    "Killed process ", "<NO_OTHER_FAILURES>",
})


def test_every_record_of_the_real_logs_names_a_row_of_the_table() -> None:
    from tests.incidents.corpus import cases

    for case in cases():
        resolve = exact_resolver(case.nodes)
        for node, node_lines in case.logs.items():
            log = parse_lines(node, node_lines, resolve)
            for hit in log.signals:
                assert hit.signal in BY_ID and (hit.format is None or hit.format in BY_ID)
                assert hit.code is None or hit.code in BY_ID
            for err in log.network:
                assert err.signal in BY_ID
            for cuda in log.cuda:
                assert cuda.kind is None or cuda.kind.runtime_name in BY_ID


def test_the_files_are_checked_when_read() -> None:
    header = "id,parse,meaning,category,markers,says,never,example,source\n"
    good = "x,text,link_fabric,network,abcd,s,n,abcd,https://a\n"
    assert parse_signals(header + good)[0].id == "x"
    for bad, why in (
        ("x,text,link_fabric,,abcd,s,n,abcd,https://a\n", "needs a category"),
        ("x,text,configuration,,abcd,s,n,abcd,https://a\n", "category is `configuration`"),
        ("x,nope,ambiguous,,abcd,s,n,abcd,https://a\n", "unknown parse"),
        ("x,text,ambiguous,,ab,s,n,abcd,https://a\n", "three characters"),
        ("x,text,ambiguous,,abcd,s,n,,https://a\n", "empty example"),
    ):
        with pytest.raises(SignalTableError, match=why):
            parse_signals(header + bad)
    columns = ",".join(CATALOGUE_COLUMNS)
    source = "# source: some/repo release v1 commit 0123456789abcdef\n"
    row = ("y,demo,format,ambiguous,,Abort on rank,Abort on rank %d: %s,ranks,,,s,n,Abort on rank 3: x,v1,a.c:1,"
           "https://a")
    assert parse_signals(source + columns + "\n" + row + "\n", "demo.csv")[0].fields == ("ranks",)
    for bad, why in (
        (columns + "\n" + row, "its release and commit"),
        (source + columns + "\n" + row.replace(",ranks,", ',"ranks,exit,host",'), "conversions"),
        (source + columns + "\n" + row.replace(",ranks,", ',"ranks,code",'), "code"),
        (source + columns + "\n" + row.replace(",ranks,", ",rank,"), "unknown field"),
        (source + columns + "\n" + row.replace("Abort on rank %d: %s", ""), "needs its format"),
        (source + columns + "\n" + row.replace(",v1,a.c:1,", ",,a.c:1,"), "release"),
        (source + "id,parse\nx,text\n", "columns"),
    ):
        with pytest.raises(SignalTableError, match=why):
            parse_signals(bad + "\n", "demo.csv")

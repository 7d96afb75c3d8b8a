"""Benchmark: the fleet with job logs, each request with its own failure time, against `tail | grep` on the same bytes.

Three cases, each over its own tree, in one run (--cases a,b,c):

a. 4,096 nodes: a day of kernel logs per host (2 MiB, bench/fleet.py's tree, quiet: no GPU event anywhere) and an
   8 MiB job log per node (`<jobs>/fleet-a/0/worker-NNNN.log`) whose first part is a hole (sparse, no disk) and whose
   last 512 KiB are real text: eight ranks' training lines and NCCL INFO lines, then every rank's NCCL watchdog
   timeout and progress line in PyTorch 2.6's shape (`[PG ID 0 PG GUID 0(default_pg) Rank N]`) and torchelastic's
   failure summary. The culprit (node 5/7 of the way through the scope) is real text over its whole file and its
   ranks say they completed one NCCL work fewer than everyone else's (`last completed NCCL work: 1578`, the others
   1579, who time out waiting for it): the job-log rules name it `collective_hang` by progress. `scope.ranks` lists
   every rank (32,768).
b. The same nodes and files (hard links to a's) except the culprit's, which after its decisive lines (watchdog and
   progress) prints --dump-mib of a stack dump (gdb-like frames behind its ranks' `[rankN]:` prefixes: no line
   holds a signal marker) before torchelastic's summary; `scope.ranks` empty, so no silent-rank rule can stand in
   for the lines that decide.
c. 16,384 nodes, 8 ranks a node (`scope.ranks` lists all 131,072), 256 KiB of kernel logs a host, 1 MiB job logs
   with a 128 KiB real tail (the culprit real text throughout): the time to answer (goal: within the seed
   request's `timeout_ms`, 10 s, with the culprit named) and the worker's peak RSS.

For each case a new Python process (the worker) builds the provider as the service does (`from_options` with the
`files` kernel source over the case's kernel tree and `ATTRIBUTION_JOB_LOG_DIR` set; the provider keeps no answer
when job logs are read) and sends --requests `fast` requests, each with its own failure time (18:00:00 plus 3.7 s
times the request's number), `timeout_ms` 10,000 and a 10 s deadline, timing `provider.fast()`. After each request,
untimed, a child process (so that its memory is not the worker's) calls `providers.telemetry.joblog.scan_job_logs`
with the request's job-log arguments (a 600 s deadline, the default limits and node identity: the names are exact),
then `conclude` over what it read, with the garbage collector paused as the provider pauses it (without the pause
the rules over 131,072 ranks took 2.5 s against 0.6 s), to learn the bytes the reader takes of each node
(`JobLogScan.read.nodes[node].bytes_read`); both wall times are printed, as the reader's and the rules' time without a
deadline. Then, timed, in the same run: `tail -q -c <kernel share> <every kern.log of the scope>` and `tail -q -c
<bytes read> <node>.log ...` (one `tail` per distinct byte count) into one `grep -c -F -e NVRM -e 'NCCL work'`. The
kernel share is the bytes of a host's `kern.log` from the start of the request's reading window to its end (as
bench/fleet.py). The same child, untimed, also makes the kernel scan alone (`provider.collect` over the request's
window, a provider of its own, its caches cold). Printed for
each case: the first request, the median of the others, the C tools' median, the ratio, the worker's peak RSS
(`VmHWM`, before the first request and at the end), how far answers came after the deadline, whether the answer
named the culprit, its top finding and its error (insufficient_telemetry: the notes on what was not read or not
concluded), with `os.getloadavg()`. When the deadline cut the job-log read, the provider's time is the deadline's
and the C tools read every byte the reader would have taken: the untimed reader's time says how far off it is.

The worker calls `provider.after_fork()` first, as a server's worker does: with `ATTRIBUTION_KERNEL_LOG_SCAN_PROCESS`
1 (--scan-process 1, the default) it forks its kernel-log scan process, which scans the kernel logs while the worker
reads the job logs; --scan-process 0,1 runs each case both ways, one after the other, and prints the scan process's
peak RSS beside the worker's.

With --against DIR (another checkout of this repository, its dependencies those of this one's interpreter) each
case's worker runs from DIR's `bench/fleet_jobs.py` and from this one in turns, --rounds times, over the same trees:
on a shared machine whose speed moves within minutes, only turns compare two versions. Each line then names its
checkout.

    python bench/fleet_jobs.py --cases a,b,c --requests 3
    python bench/fleet_jobs.py --cases a,b,c --requests 3 --tree DIR --scan-process 0,1
    python bench/fleet_jobs.py --cases a,b --requests 5 --tree DIR --against ../other-checkout --rounds 2

Disk (real blocks: the job logs' heads are holes) and generation time, measured on 2 shared cores (load 1 to 3):
cases a and b, 6.1 GiB of kernel logs (21 s) and 2.1 GiB of job-log text (29 s); b adds the culprit's 8 MiB file,
its other files hard links to a's (under a second); case c, 3.1 GiB of kernel logs (10 s) and 2.1 GiB of job-log
text (26 s): 13.4 GiB written in about 90 s for the three. A run of the three cases with --requests 3 then takes
about 5 minutes. With --tree DIR the trees are written there once and reused by a later run with the same sizes (a
stamp per tree); without it they go to a temporary folder removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.fleet import (  # noqa: E402 - after the path tweak that lets the script run from anywhere
    FIRST_FAILURE,
    LOOKBACK,
    SLACK,
    STEP,
    TEMPLATES,
    _peak_mib,
    _window_share,
    host,
    write_tree,
)

KIB = 1024
MIB = 1024 * 1024
RANKS = 8
#: the seed request's `timeout_ms`
TIMEOUT_MS = 10_000
#: the work numbers of the hang: every rank but the culprit's completed GOOD and timed out on GOOD + 1
GOOD = 1579
GREP = ["grep", "-c", "-F", "-e", "NVRM", "-e", "NCCL work"]
#: at most this many `tail` processes for the job logs (byte counts are rounded up to 64 KiB past it)
MAX_TAILS = 64


# ---------------------------------------------------------------- job logs


def _training(node: str, base: int, nranks: int, steps: range) -> str:
    """Training lines of a node's eight ranks and, every 16 steps, an NCCL INFO line."""
    out = []
    for step in steps:
        for local in range(RANKS):
            out.append(f"[rank{base + local}]: {{'loss': {2 + ((step * 7 + local) % 1000) / 1000:.4f}, 'grad_norm': "
                       f"0.{step % 97:02d}, 'learning_rate': 1.2e-05, 'epoch': 0.{step % 89:02d}, 'step': {step}}}\n")
        if step % 16 == 0:
            out.append(f"{node}:{4100 + base // RANKS}:{4200 + step % 64} [0] NCCL INFO Channel 02/0 : {base} -> "
                       f"{(base + RANKS) % nranks} [send] via NET/IB/0/GDRDMA\n")
    return "".join(out)


def _hang(base: int, behind: bool) -> str:
    """Each rank's watchdog timeout and progress line (PyTorch 2.6): the culprit's ranks one work behind."""
    done = GOOD - 1 if behind else GOOD
    out = []
    for local in range(RANKS):
        r = base + local
        out.append(f"[rank{r}]:[E909 17:59:58.{414640 + r % 1000:09d} ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog "
                   f"caught collective operation timeout: WorkNCCL(SeqNum={done + 1}, OpType=ALLREDUCE, "
                   "NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600067 milliseconds before "
                   "timing out.\n")
        out.append(f"[rank{r}]:[E909 17:59:58.{465224 + r % 1000:09d} ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID "
                   f"0(default_pg) Rank {r}] Exception (either an error or timeout) detected by watchdog at work: "
                   f"{done + 1}, last enqueued NCCL work: {done + 3}, last completed NCCL work: {done}.\n")
    return "".join(out)


def _dump(base: int, size: int) -> str:
    """About `size` bytes of a stack dump the culprit's ranks print (gdb-like frames: no signal marker)."""
    out, n, frame = [], 0, 0
    while n < size:
        r = base + frame % RANKS
        line = (f"[rank{r}]: #{frame % 40:<2d} 0x00007f{(frame * 7919) % 0xFFFFFF:06x}{frame % 97:02x} in "
                f"c10d::ProcessGroupNCCL::WorkNCCL::synchronizeStream() from /opt/torch/lib/libtorch_cuda.so\n")
        out.append(line)
        n += len(line)
        frame += 1
    return "".join(out)


def _summary(node: str, base: int) -> str:
    """torchelastic's failure summary of the node's agent (SIGABRT of its first rank)."""
    return (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        "============================================================\ntrain.py FAILED\n"
        "------------------------------------------------------------\nFailures:\n  <NO_OTHER_FAILURES>\n"
        "------------------------------------------------------------\nRoot Cause (first observed failure):\n[0]:\n"
        f"  time      : 2026-09-09_17:59:59\n  host      : {node}\n  rank      : {base} (local_rank: 0)\n"
        f"  exitcode  : -6 (pid: {9000 + base // RANKS})\n  error_file: <N/A>\n"
        f"  traceback : Signal 6 (SIGABRT) received by PID {9000 + base // RANKS}\n"
        "============================================================\n"
    )


def node_text(n: int, nodes: int, real: int, culprit: bool, dump: int = 0) -> bytes:
    """A node's real text, about `real` bytes: training lines, the hang, the dump (if any), the summary."""
    node, base = host(n), n * RANKS
    tail = _hang(base, culprit) + _dump(base, dump) + _summary(node, base)
    block = len(_training(node, base, nodes * RANKS, range(16)).encode()) / 16
    steps = max(1, int((real - len(tail.encode())) / block))
    return (_training(node, base, nodes * RANKS, range(100_000 - steps, 100_000)) + tail).encode()


def write_jobs(folder: Path, nodes: int, file_bytes: int, real: int, culprit: int, dump: int, link: Path | None):
    """Every node's `<node>.log` (a hole, then its real text; the culprit real throughout); with `link`, every file
    but the culprit's is a hard link to the file of the same name there. Kept when its stamp matches."""
    stamp = folder.parent / f".{folder.parent.name}"
    wanted = json.dumps({"nodes": nodes, "file": file_bytes, "real": real, "culprit": culprit, "dump": dump,
                         "link": None if link is None else (link.parent / f".{link.parent.name}").read_text()})
    if stamp.exists() and stamp.read_text() == wanted:
        return
    if folder.parent.exists():
        shutil.rmtree(folder.parent)
    folder.mkdir(parents=True)
    t0 = time.perf_counter()
    for n in range(nodes):
        path = folder / f"{host(n)}.log"
        if link is not None and n != culprit:
            os.link(link / path.name, path)
            continue
        data = node_text(n, nodes, file_bytes if n == culprit else real, n == culprit, dump if n == culprit else 0)
        with path.open("wb") as f:
            f.truncate(max(0, file_bytes - len(data)))  # the head: a hole
            f.seek(0, 2)
            f.write(data)
    os.sync()
    stamp.write_text(wanted)
    links = "" if link is None else f" (all but the culprit's hard links to {link.parent.name}'s)"
    print(f"job logs {folder.parent.name}: {nodes} nodes x {file_bytes / MIB:.0f} MiB, {_disk(folder) / MIB:.0f} MiB "
          f"on disk{links}, written in {time.perf_counter() - t0:.0f} s", flush=True)


def _disk(folder: Path) -> int:
    """Bytes of disk the folder's files take (holes cost none; a hard link's blocks are counted once)."""
    seen: dict[int, int] = {}
    for p in folder.rglob("*"):
        st = p.stat()
        seen[st.st_ino] = st.st_blocks * 512
    return sum(seen.values())


# ---------------------------------------------------------------- the worker


def _provider(spec: dict):  # noqa: ANN202 - a TelemetryProvider, imported late as the service's boot imports it
    """The provider as the service builds it (`from_options`) over the case's trees."""
    from providers.telemetry import TelemetryProvider

    return TelemetryProvider.from_options({
        "ATTRIBUTION_KERNEL_LOG_SOURCE": "files",
        "ATTRIBUTION_KERNEL_LOG_DIR": spec["kernel"],
        "ATTRIBUTION_JOB_LOG_DIR": spec["jobs"],
        "ATTRIBUTION_KERNEL_LOG_SCAN_PROCESS": str(spec["scan_process"]),
    })


def _request(spec: dict, k: int):  # noqa: ANN202 - an AttributionRequest
    """The case's request number `k`: the whole scope, its own failure time."""
    from providers.base import AttributionRequest, FailureContext, Phase, Scope, WorkloadContext

    nodes = spec["nodes"]
    ranks = tuple(range(nodes * RANKS)) if spec["ranks"] else ()
    return AttributionRequest(
        workload_id=spec["workload"],
        scope=Scope(nodes=tuple(host(n) for n in range(nodes)), ranks=ranks),
        failure_context=FailureContext(detected_at=FIRST_FAILURE + k * STEP, detection_signal="application_error"),
        timeout_ms=TIMEOUT_MS,
        workload_context=WorkloadContext(workflow_id="fleet", attempt_index=0),
        phase=Phase.FAST,
    )


def scan(spec: dict) -> None:
    """The untimed scans of request `spec["k"]` (a child of the worker, so that their memory is not the worker's):
    the job logs, printing the reader's byte count per node grouped by count, and the kernel logs alone
    (`provider.collect` over the request's window, in this process)."""
    from providers.base import Deadline
    from providers.telemetry.collection import collector_paused
    from providers.telemetry.joblog import conclude, scan_job_logs
    from providers.telemetry.window import fast_window

    names = [host(n) for n in range(spec["nodes"])]
    with collector_paused():  # as the provider reads and concludes (providers/telemetry/collection.py)
        t0 = time.perf_counter()
        result = scan_job_logs(Path(spec["jobs"]), spec["workload"], 0, names, Deadline.after_ms(600_000))
        seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        conclude(names, list(range(spec["nodes"] * RANKS)) if spec["ranks"] else [], result.logs)
        rules = time.perf_counter() - t0
    groups: dict[int, list[int]] = {}
    for n, name in enumerate(names):
        read = result.read.nodes.get(name)
        if read is not None and read.bytes_read:
            groups.setdefault(read.bytes_read, []).append(n)
    culprit = result.read.nodes.get(host(spec["culprit"]))
    late = len(result.read.late)
    del result
    provider = _provider(spec)
    window = fast_window(_request(spec, spec["k"]), provider.settings.lookback, provider.settings.grace)
    t0 = time.perf_counter()
    with collector_paused():  # as within the provider's request
        provider.collect(names, window, Deadline.after_ms(600_000), None)  # type: ignore[arg-type]
    kernel = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "rules": rules, "groups": groups, "late": late, "kernel": kernel,
                      "culprit_bytes": None if culprit is None else culprit.bytes_read}))


def _private_mib(pid: int) -> float:
    """The memory only process `pid` holds now (`Private_Clean` + `Private_Dirty` of its smaps_rollup)."""
    kib = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(("Private_Clean:", "Private_Dirty:")):
            kib += int(line.split()[1])
    return kib / 1024


def _c_tools(spec: dict, kernel_share: int, groups: dict[int, list[int]]) -> tuple[float, int, int]:
    """`tail -c <share>` of every kernel log and `tail -c <bytes read>` of every job log into one grep: (seconds,
    lines counted, tail processes)."""
    if len(groups) > MAX_TAILS:
        rounded: dict[int, list[int]] = {}
        for count, members in groups.items():
            rounded.setdefault(-(-count // (64 * KIB)) * 64 * KIB, []).extend(members)
        groups = rounded
    kernel = [f"{host(n)}/kern.log" for n in range(spec["nodes"])]
    folder = Path(spec["jobs"]) / spec["workload"] / "0"
    t0 = time.perf_counter()
    r, w = os.pipe()
    grep = subprocess.Popen(GREP, stdin=r, stdout=subprocess.PIPE)
    os.close(r)
    try:
        subprocess.run(["tail", "-q", "-c", str(kernel_share), *kernel], stdout=w, cwd=spec["kernel"], check=True)
        for count, members in sorted(groups.items()):
            files = [f"{host(n)}.log" for n in members]
            subprocess.run(["tail", "-q", "-c", str(count), *files], stdout=w, cwd=folder, check=True)
    finally:
        os.close(w)
        out, _ = grep.communicate(timeout=600)
    return time.perf_counter() - t0, int(out or 0), 1 + len(groups)


def worker(spec: dict) -> None:
    """One case: the provider's requests and, after each, the untimed scans and the C tools; prints one JSON line."""
    from providers.base import Deadline, ErrorType, ProviderProcessingError

    culprit = host(spec["culprit"])
    provider = _provider(spec)
    provider.after_fork()  # as a server's worker, forked with one thread: its kernel-log scan process, if set
    helper = provider._scans.pid
    before = _peak_mib()
    provider_s, grep_s, scan_s, rules_s, kernel_s, answers = [], [], [], [], [], []
    scanned: dict = {}
    for k, share in enumerate(spec["shares"]):
        request = _request(spec, k)
        t0 = time.perf_counter()
        try:
            outcome = provider.fast(request, Deadline.after_ms(TIMEOUT_MS), None)
            error = outcome.error
            findings = [(getattr(f.target, "name", "job"), f.error_category) for f in outcome.attributions]
            answer = {"findings": findings, "error": None if error is None else [error.type.value, error.message]}
        except ProviderProcessingError as exc:  # the app answers these as a typed error
            answer = {"findings": [], "error": [type(exc).__name__, str(exc)]}
        provider_s.append(time.perf_counter() - t0)
        answer["named"] = any(name == culprit for name, _ in answer["findings"])
        answers.append(answer)
        child = subprocess.run([sys.executable, __file__, "--scan", json.dumps({**spec, "k": k})],
                               capture_output=True, text=True, check=True, timeout=900)  # fmt: skip
        scanned = json.loads(child.stdout.strip().splitlines()[-1])
        scan_s.append(scanned["seconds"])
        rules_s.append(scanned["rules"])
        kernel_s.append(scanned["kernel"])
        groups = {int(count): members for count, members in scanned["groups"].items()}
        seconds, lines, tails = _c_tools(spec, share, groups)
        grep_s.append(seconds)
    helper_peak = _peak_mib(helper) if helper else None
    helper_private = _private_mib(helper) if helper else None
    provider.close()
    print(json.dumps({
        "first_s": provider_s[0], "provider_s": statistics.median(provider_s[1:] or provider_s),
        "all_s": provider_s, "grep_s": statistics.median(grep_s), "scan_s": statistics.median(scan_s),
        "kernel_s": statistics.median(kernel_s), "rules_s": statistics.median(rules_s),
        "lines": lines, "tails": tails, "kernel_share": statistics.mean(spec["shares"]),
        "job_bytes": sum(int(c) * len(m) for c, m in scanned["groups"].items()),
        "culprit_bytes": scanned["culprit_bytes"], "scan_late": scanned["late"],
        "answers": answers, "insufficient": ErrorType.INSUFFICIENT_TELEMETRY.value,
        "rss_before_mib": before, "rss_peak_mib": _peak_mib(), "requests": len(provider_s),
        "scan_process": helper != 0, "scan_process_peak_mib": helper_peak, "scan_process_private_mib": helper_private,
    }))  # fmt: skip


# ---------------------------------------------------------------- the cases


def cases(args: argparse.Namespace, root: Path) -> dict[str, dict]:
    """Each case's trees (written unless their stamps match) and the spec its worker gets."""
    a_nodes, c_nodes = args.a_nodes, args.c_nodes
    jobs = root / "jobs"
    wanted = set(args.cases.split(","))
    out: dict[str, dict] = {}
    if wanted & {"a", "b"}:
        kernel = root / f"kernel-{a_nodes}x{args.kib_per_host}"
        write_tree(kernel, a_nodes, args.kib_per_host, quiet=True)
        culprit = a_nodes * 5 // 7
        a_folder = jobs / "fleet-a" / "0"
        write_jobs(a_folder, a_nodes, args.file_mib * MIB, args.tail_kib * KIB, culprit, 0, None)
        base = {"nodes": a_nodes, "kernel": str(kernel), "jobs": str(jobs), "culprit": culprit}
        if "a" in wanted:
            out["a"] = {**base, "workload": "fleet-a", "ranks": True}
        if "b" in wanted:
            write_jobs(jobs / "fleet-b" / "0", a_nodes, args.file_mib * MIB, args.tail_kib * KIB, culprit,
                       int(args.dump_mib * MIB), a_folder)  # fmt: skip
            out["b"] = {**base, "workload": "fleet-b", "ranks": False}
    if "c" in wanted:
        kernel = root / f"kernel-{c_nodes}x{args.c_kib_per_host}"
        write_tree(kernel, c_nodes, args.c_kib_per_host, quiet=True)
        culprit = c_nodes * 5 // 7
        write_jobs(jobs / "fleet-c" / "0", c_nodes, args.c_file_mib * MIB, args.c_tail_kib * KIB, culprit, 0, None)
        out["c"] = {"nodes": c_nodes, "kernel": str(kernel), "jobs": str(jobs), "culprit": culprit,
                    "workload": "fleet-c", "ranks": True}
    for spec in out.values():
        folder = Path(spec["kernel"])
        times = [FIRST_FAILURE + k * STEP for k in range(args.requests)]
        spec["shares"] = [
            round(statistics.mean(_window_share(folder / host(n) / "kern.log", at - LOOKBACK - SLACK)
                                  for n in range(min(TEMPLATES, spec["nodes"]))))
            for at in times
        ]  # fmt: skip
    return out


def report(name: str, spec: dict, r: dict) -> None:
    nodes, culprit = spec["nodes"], host(spec["culprit"])
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    ratio = r["provider_s"] / r["grep_s"]
    helper = "the kernel logs scanned in the worker (no scan process)"
    if r["scan_process"]:
        helper = f"the kernel logs scanned by the worker's scan process, its peak RSS {r['scan_process_peak_mib']:.0f} "
        helper += f"MiB (pages shared with the worker counted in both), {r['scan_process_private_mib']:.0f} MiB "
        helper += "its own at the end"
    print(f"[{name}] {nodes} nodes, scope.ranks {nodes * RANKS if spec['ranks'] else 'empty'}, culprit {culprit}: "
          f"provider fast: first request {r['first_s'] * 1000:.0f} ms, then {r['provider_s'] * 1000:.0f} ms (median "
          f"of {r['requests'] - 1}, each its own failure time; all {[round(s, 2) for s in r['all_s']]} s); tail -c "
          f"{r['kernel_share'] / KIB:.0f}KiB of each kern.log + tail -c <bytes read> of each job log "
          f"({r['job_bytes'] / MIB:.1f} MiB, {r['tails'] - 1} tail(s)) | grep -c: {r['grep_s'] * 1000:.0f} ms; "
          f"ratio {ratio:.1f}x; worker RSS {r['rss_before_mib']:.0f} MiB before the first request, peak "
          f"{r['rss_peak_mib']:.0f} MiB; {helper}; load {load}", flush=True)  # fmt: skip
    over = [round(s - TIMEOUT_MS / 1000, 2) for s in r["all_s"] if s > TIMEOUT_MS / 1000]
    print(f"[{name}] answers past the {TIMEOUT_MS / 1000:.0f} s deadline by {over or 'none'} s; untimed, the "
          f"medians: the kernel scan alone (provider.collect) {r['kernel_s']:.1f} s, the job-log reader without a "
          f"deadline (scan_job_logs) {r['scan_s']:.1f} s ({r['scan_s'] / r['grep_s']:.1f}x the C tools) and its "
          f"rules over every node's logs (conclude) {r['rules_s']:.1f} s, reading {r['culprit_bytes']} bytes of the "
          f"culprit's job log, {r['scan_late']} node(s) late; grep counted "
          f"{r['lines']} lines", flush=True)  # fmt: skip
    for k, a in enumerate(r["answers"]):
        top = a["findings"][0] if a["findings"] else None
        error = a["error"]
        note = "" if error is None else f"; error {error[0]}: {error[1][:600]}"
        print(f"[{name}] request {k}: culprit named: {'yes' if a['named'] else 'NO'}; top finding {top}; "
              f"{len(a['findings'])} finding(s){note}", flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default="a,b,c", help="which cases, comma-separated")
    parser.add_argument("--requests", type=int, default=3, help="requests per case (the median of all but the first)")
    parser.add_argument("--tree", type=Path, help="write the trees here and keep them (reused by a later run)")
    parser.add_argument("--a-nodes", type=int, default=4096, help="nodes of cases a and b")
    parser.add_argument("--kib-per-host", type=int, default=2048, help="a host's day of kernel logs, cases a and b")
    parser.add_argument("--file-mib", type=int, default=8, help="a job log's length, cases a and b")
    parser.add_argument("--tail-kib", type=int, default=512, help="a job log's real text, cases a and b")
    parser.add_argument("--dump-mib", type=float, default=2.0, help="the culprit's dump after its decisive lines (b)")
    parser.add_argument("--c-nodes", type=int, default=16384)
    parser.add_argument("--c-kib-per-host", type=int, default=256)
    parser.add_argument("--c-file-mib", type=int, default=1)
    parser.add_argument("--c-tail-kib", type=int, default=128)
    parser.add_argument("--scan-process", default="1", help="ATTRIBUTION_KERNEL_LOG_SCAN_PROCESS: 1 (the default), "
                        "0, or 0,1 for both, one after the other for each case")
    parser.add_argument("--against", type=Path, help="another checkout whose worker runs in turns with this one's")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of turns (with --against)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # a case's spec (JSON)
    parser.add_argument("--scan", help=argparse.SUPPRESS)  # the untimed scan's spec (JSON)
    args = parser.parse_args(argv)
    if args.worker:
        worker(json.loads(args.worker))
        return
    if args.scan:
        scan(json.loads(args.scan))
        return
    print(f"load average {os.getloadavg()}, {os.cpu_count()} cores", flush=True)
    root = args.tree or Path(tempfile.mkdtemp(prefix="fleet-jobs-"))
    try:
        t0 = time.perf_counter()
        specs = cases(args, root)
        print(f"trees ready in {time.perf_counter() - t0:.0f} s", flush=True)
        modes = [int(m) for m in args.scan_process.split(",")]
        here = Path(__file__).resolve().parents[1]
        checkouts = [here] if args.against is None else [args.against.resolve(), here]
        for _ in range(args.rounds if args.against is not None else 1):
            for checkout in checkouts:
                script = checkout / "bench" / "fleet_jobs.py"
                label = "" if args.against is None else f", {'this checkout' if checkout == here else checkout}"
                for name, spec in specs.items():
                    for mode in modes:
                        spec = {**spec, "scan_process": mode}
                        child = subprocess.run([sys.executable, str(script), "--worker", json.dumps(spec)],
                                               capture_output=True, text=True, check=False, timeout=3600)  # fmt: skip
                        if child.returncode != 0:
                            print(f"[{name}{label}] worker failed ({child.returncode}): {child.stderr[-2000:]}",
                                  flush=True)  # fmt: skip
                            continue
                        report(name + label, spec, json.loads(child.stdout.strip().splitlines()[-1]))
    finally:
        if args.tree is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

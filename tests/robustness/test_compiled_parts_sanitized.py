"""The compiled parts read untrusted bytes: built with AddressSanitizer and UndefinedBehaviorSanitizer and fed random
and mutated input, no read outside a buffer, no overflow, no undefined behaviour.

setup.py's C sources (the job-log reader's candidate lines, gap pass and reading of watchdog and progress lines, the
kernel-log block's stamp facts, bisection, repeated `[seconds]` values and a line's stamp, the literal search, the Loki
source's buffer of a node's entries, the Loki client's reading of an answer's entries) are built
by setup.py into a temporary folder with `-fsanitize=address,undefined`, and a child process loads them (the sanitizers'
runtimes preloaded, as an instrumented library needs, and Python's objects each allocated by malloc, so that a read
past one is seen) and calls each function on seeded random bytes, on valid
gaps, blocks and lines with bytes flipped, cut or repeated, and on every start and end of short inputs (the line
reader's input also in a buffer of its own size: a bytes object has a NUL after its end); a sanitizer's
report ends the child with an error. The functions' answers are compared with Python's in
tests/joblog/test_candidates.py, tests/joblog/test_gaps.py, tests/joblog/test_kind_lines.py,
tests/telemetry/test_stamp_facts.py, tests/telemetry/test_literals.py, tests/telemetry/test_loki_job_buffer.py and
tests/telemetry/test_loki_entries.py; here
only their memory safety is.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SANITIZE = "-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1"

CHILD = textwrap.dedent(
    """
    import ctypes, importlib.machinery, importlib.util, random, sys

    def load(name, path):
        loader = importlib.machinery.ExtensionFileLoader(name, path)
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        return module

    gaps = load("providers.telemetry.joblog._gaps", sys.argv[1])
    stamps = load("providers.telemetry.kernel.sources._stamps", sys.argv[2])
    kinds = load("providers.telemetry.joblog._kind_lines", sys.argv[3])
    candidates = load("providers.telemetry.joblog._candidates", sys.argv[4])
    literals = load("providers.telemetry._literals", sys.argv[5])
    loki_buffer = load("providers.telemetry.joblog._loki_buffer", sys.argv[6])
    loki_entries = load("providers.telemetry.loki._entries", sys.argv[7])
    lengths = tuple(range(1, 9))
    deciding = bytes([1, 0, 1, 1, 0, 1, 0, 1])
    rng = random.Random(20261207)
    line = b"2026-12-07T10:00:%02d.000000+00:00 host kernel: [ %d.5] eth0 [rank%d]: up\\n"
    block = b"".join(line % (i, i, i % 8) for i in range(40))
    gap = b"".join(b"[rank%d]:[I1207 10:00:00.1 x.cpp:1] loss 0.5\\n" % (i % 8) for i in range(40))
    kind = (
        b"2026-12-07T10:00:00.000001Z [rank3]:[E909 17:59:58.000414643 77 ProcessGroupNCCL.cpp:616] [PG ID 0 PG GUID "
        b"0(default_pg) Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, "
        b"NumelIn=4, Timeout(ms)=600000) ran for 600067 milliseconds before timing out.\\n"
        b"[rank3]:[PG 1 (mesh) Rank 3] Exception (either an error or timeout) detected by watchdog at work: -1580, "
        b"last enqueued NCCL work: 1582, last completed NCCL work: 9999999999999999999.\\n"
    )
    pieces = [b"[", b"[rank", b"]:", b"\\n", b"1", b"9" * 12, b"2026-12-07T10:00:00", b".", b" ", b"\\x00", b"\\xff",
              b"Timeout(ms)=", b"T", b"-"]
    # literal searches of the pieces, of random texts of 1 to 8 bytes (a NUL first among them) and of one byte alone
    searches = [literals.Search(tuple(pieces)), literals.Search((b"\\x00", b"\\x1b")), literals.Search(tuple(
        bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9))) for _ in range(40)) + (b"\\x00a", b"a"))]

    def mutated(data):
        data = bytearray(data)
        for _ in range(rng.randrange(1, 8)):
            kind, at = rng.randrange(4), rng.randrange(len(data) + 1)
            if kind == 0 and data:
                data[min(at, len(data) - 1)] = rng.randrange(256)
            elif kind == 1:
                data[at:at] = rng.choice(pieces)
            elif kind == 2:
                del data[at : at + rng.randrange(1, 40)]
            else:
                data[at:at] = data[max(0, at - 30) : at]
        return bytes(data)

    def exact(data):
        # the bytes in a buffer of their own size: a bytes object holds a NUL after its end, an array spare room
        return (ctypes.c_char * len(data)).from_buffer_copy(data)

    def inputs():
        for _ in range(4000):
            yield bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
            yield b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 60)))
            yield mutated(block)
            yield mutated(gap)
            yield mutated(kind)

    calls = 0
    for data in inputs():
        if not data:
            continue
        start = rng.randrange(len(data))
        gaps.place(data, start, rng.randrange(start + 1, len(data) + 1), rng.choice([0, 5, 507, 10**9]))
        stamps.facts(data, b"T", b".", 6, b"+00:00")
        stamps.facts(data, b" ", b"", 0, b"Z")
        stamps.repeated_lines(data)
        stamps.iso_time(data)
        stamps.iso_time(data[start:])
        end = rng.randrange(start, len(data) + 1)
        own = exact(data)
        # matches of words of 1-8 bytes anywhere in the data (ends from 0 to one past it: the last refused)
        found = sorted((rng.randrange(0, len(data) + 2), rng.randrange(8)) for _ in range(rng.randrange(0, 30)))
        try:
            candidates.lines(own, found, lengths, deciding, rng.randrange(0, 9))
        except ValueError:
            pass
        for search in searches:
            search.ends(own)
            search.ends(data[start:end])
        # a node's Loki entries: any times a Loki answer may hold, lines of any text (newlines, other scripts)
        text = data.decode("utf-8", "replace")
        loki_buffer.joined([(rng.choice([0, 2**63 - 1, rng.randrange(2**63)]),
                             text[rng.randrange(len(text) + 1) :][: rng.randrange(80)]) for _ in range(3)])
        # a Loki answer's streams: times of any digits (past 2**63-1 and 20 digits among them), values too short
        digits = "".join(chr(48 + b % 10) for b in data[:22])
        times = [digits[: rng.randrange(0, 22)], str(2**63 - 1), "9" * 19, text[:5], 7]
        streams = [{"stream": {"host": rng.choice(["n", 5, None])},
                    "values": [rng.choice([[rng.choice(times), text[start:end]], [rng.choice(times)], [],
                                           [rng.choice(times), None, {}]]) for _ in range(rng.randrange(5))]}
                   for _ in range(rng.randrange(4))]
        try:
            loki_entries.read(streams, "host")
        except ValueError:
            pass
        for watchdog in (True, False):
            kinds.read(own, start, end, rng.randrange(0, 300), watchdog, rng.choice([4096, end - start, 10]))
            kinds.read(own, 0, len(data), len(data), watchdog, 4096)
        if data.endswith(b"\\n"):
            stamps.line_after(data, data[:rng.randrange(0, 40)], rng.random() < 0.5, data.count(b"\\n"))
        calls += 1
    for size in range(1, 24):  # every start and end of short inputs
        data = (gap[:size] + block[:size])[:size]
        for line in kind.split(b"\\n")[:2]:  # every end of each kind line (the shape cut anywhere)
            for end in range(len(line) + 1):
                own = exact(line[:end])
                kinds.read(own, 0, end, end, True, 4096)
                kinds.read(own, 0, end, end, False, 4096)
        for start in range(size):
            for end in range(start + 1, size + 1):
                gaps.place(data, start, end, 3)
                kinds.read(data, start, end, end - start, True, 4096)
                kinds.read(data, start, end, end - start, False, 4096)
        stamps.facts(data, b"T", b".", 6, b"+00:00")
        stamps.repeated_lines(data)
    for end in range(block.index(b"\\n") + 2):  # every end of a stamped line (the stamp cut anywhere)
        stamps.iso_time(block[:end])
    print("calls", calls)
    """
)


def _runtime(name: str) -> str:
    found = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True, check=True).stdout
    return found.strip()


def test_the_compiled_parts_read_random_and_mutated_input_without_a_sanitizer_report(tmp_path: Path) -> None:
    # setup.py's own list of parts, built outside the checkout (nothing is written beside the sources)
    lib = tmp_path / "lib"
    env = {**os.environ, "CFLAGS": SANITIZE, "LDFLAGS": "-fsanitize=address,undefined"}
    built = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(lib), "--build-temp", str(tmp_path / "t")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    paths = {".".join(p.relative_to(lib).parts[:-1] + (p.name.split(".")[0],)): p for p in lib.rglob("*.so")}
    assert sorted(paths) == [
        "providers.telemetry._literals", "providers.telemetry.joblog._candidates", "providers.telemetry.joblog._gaps",
        "providers.telemetry.joblog._kind_lines", "providers.telemetry.joblog._loki_buffer",
        "providers.telemetry.kernel.sources._stamps", "providers.telemetry.loki._entries",
    ]  # fmt: skip
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(paths["providers.telemetry.joblog._gaps"]),
         str(paths["providers.telemetry.kernel.sources._stamps"]),
         str(paths["providers.telemetry.joblog._kind_lines"]), str(paths["providers.telemetry.joblog._candidates"]),
         str(paths["providers.telemetry._literals"]), str(paths["providers.telemetry.joblog._loki_buffer"]),
         str(paths["providers.telemetry.loki._entries"])],
        env={
            **os.environ,
            "LD_PRELOAD": f"{_runtime('libasan.so')}:{_runtime('libubsan.so')}",
            "PYTHONMALLOC": "malloc",  # every object its own allocation, so that a read past a buffer is seen
            "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=86",
            "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=87",
        },
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-6000:]
    assert child.stdout.split() == ["calls", child.stdout.split()[1]] and int(child.stdout.split()[1]) >= 15000

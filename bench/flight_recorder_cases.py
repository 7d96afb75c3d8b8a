"""Dev script: flight-recorder cases from outside (dumps with their injected faults) read as the service reads them,
under several rank-to-node layouts, and what the answer names; prints figures, asserts nothing.

    .venv/bin/python bench/flight_recorder_cases.py PATH

PATH holds one folder per case, each with the ranks' dumps (`_dump_<rank>`, `nccl_trace_rank_<rank>`, ...) and a
`fault_injection.log` naming the injected ranks (`Fault ranks: [12, 14]`), as nvidia-resiliency-ext's
`tests/attribution/unit/fr_traces/` lays them out. Nothing of PATH is copied into the repository: each layout is
built in a temporary folder. For each case and layout it prints the ranks and nodes named, whether they are the
injected ranks' nodes, and whether a node of no injected rank was named; then the same with one injected rank's dump
removed (placed by the one scope node that left no dump, in the one-rank-a-node layout), and with each node's whole
folder removed in the four-ranks-a-node layout (the injected ranks' nodes still expected, no other). Last, per kind
of variant: the answers, those naming a healthy node, and the injected ranks' nodes named of those expected.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from providers.base import Deadline  # noqa: E402
from providers.telemetry.flight_recorder import conclude, read_dumps  # noqa: E402
from providers.telemetry.flight_recorder.source import rank_of  # noqa: E402

LAYOUTS = {
    "4 consecutive ranks a node": lambda r: f"node-{r // 4}",
    "8 consecutive ranks a node": lambda r: f"node-{r // 8}",
    "2 ranks a node, round robin over 8": lambda r: f"node-{r % 8}",
    "1 rank a node": lambda r: f"node-{r}",
}


def _truth(case: Path) -> set[int]:
    log = case / "fault_injection.log"
    m = re.search(r"Fault ranks: \[([\d, ]*)\]", log.read_text()) if log.is_file() else None
    return {int(x) for x in m.group(1).split(",") if x.strip()} if m else set()


def _run(
    case: Path, layout, drop: int | None, work: Path, drop_node: str | None = None
) -> tuple[list[int], list[str], set[str], float]:
    folder = work / "job" / "0"
    if folder.exists():
        shutil.rmtree(folder)
    ranks = []
    for f in sorted(case.iterdir()):
        found = rank_of(f.name)
        if found is None or not f.is_file():
            continue
        rank = found[0]
        ranks.append(rank)
        node = folder / layout(rank)
        node.mkdir(parents=True, exist_ok=True)
        if rank != drop:
            shutil.copy(f, node / f.name)
    nodes = sorted({layout(r) for r in ranks})
    for n in nodes:
        (folder / n).mkdir(parents=True, exist_ok=True)
    if drop is not None and not any((folder / layout(drop)).iterdir()):
        (folder / layout(drop)).rmdir()
    if drop_node is not None:
        shutil.rmtree(folder / drop_node)
    start = time.perf_counter()
    read = read_dumps(folder, Deadline(time.monotonic() + 60))
    result = conclude(read, nodes, ranks, {}, datetime.now(UTC))
    took = time.perf_counter() - start
    named_ranks = sorted({int(m.group(1)) for items in result.node_items.values() for i in items
                          if (m := re.match(r"rank (\d+)", i.message))})  # fmt: skip
    return named_ranks, sorted(result.node_items), {layout(r) for r in ranks}, took


#: per kind of variant: [answers, answers naming a healthy node, injected nodes named, injected nodes expected]
TALLY: dict[str, list[int]] = {}


def _show(
    case: str,
    label: str,
    truth: set[int],
    ranks: list[int],
    nodes: list[str],
    want: list[str],
    took: float,
    kind: str = "",
) -> bool:
    healthy = sorted(set(nodes) - set(want))
    good = nodes == want and not healthy
    tally = TALLY.setdefault(kind, [0, 0, 0, 0])
    tally[0] += 1
    tally[1] += bool(healthy)
    tally[2] += len(set(nodes) & set(want))
    tally[3] += len(want)
    print(
        f"{case:16} {label:48} injected {sorted(truth)} -> ranks {ranks} nodes {nodes}"
        f"{'' if good else '  (expected ' + str(want) + ')'}"
        f"{'  HEALTHY NODE NAMED: ' + str(healthy) if healthy else ''}  {took * 1000:.0f} ms"
    )
    return good


def main() -> None:
    root = Path(sys.argv[1])
    cases = sorted(p for p in root.iterdir() if p.is_dir())
    total = ok = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for case in cases:
            truth = _truth(case)
            for name, layout in LAYOUTS.items():
                for drop in (None, *sorted(truth)):
                    if drop is not None and name != "1 rank a node":
                        continue
                    ranks, nodes, _, took = _run(case, layout, drop, work)
                    label = name + (f", rank {drop}'s dump removed" if drop is not None else "")
                    total += 1
                    kind = "one injected rank's dump removed" if drop is not None else "every dump, " + name
                    want = sorted({layout(r) for r in truth})
                    ok += _show(case.name, label, truth, ranks, nodes, want, took, kind)
            layout = LAYOUTS["4 consecutive ranks a node"]
            for node in sorted({layout(r) for r in range(16)}):
                ranks, nodes, _, took = _run(case, layout, None, work, drop_node=node)
                total += 1
                label = f"4 ranks a node, {node}'s folder removed"
                want = sorted({layout(r) for r in truth})
                kind = "an injected node's folder removed" if node in want else "a healthy node's folder removed"
                ok += _show(case.name, label, truth, ranks, nodes, want, took, kind)
    print(f"{ok} of {total} answered with exactly the injected ranks' nodes")
    print(f"{'variant':48} {'answers':>7} {'healthy node named':>18} {'injected nodes named':>20}")
    for kind, (answers, healthy, named, expected) in TALLY.items():
        print(f"{kind:48} {answers:>7} {healthy:>18} {named:>14} of {expected:>3}")


if __name__ == "__main__":
    main()

"""Benchmark: the provider's one bounded cache (providers/telemetry/cache.py) against cachetools' LRUCache.

Each cache holds at most 4,096 items; a loop of gets and puts over 8,192 keys (a hit rate near one half, as a fleet
scope larger than the cache meets) is timed for both: `Bounded`, and `cachetools.LRUCache` with a `threading.Lock`
around each call, as a thread-safe use of it needs. Prints nanoseconds per operation (the median of 9 runs) and
their ratio, the two run in turn. cachetools is not a dependency of the service: install it into the environment
to compare (`pip install cachetools`); without it only `Bounded` is measured.

    python bench/cache.py
"""

from __future__ import annotations

import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from providers.telemetry.cache import Bounded  # noqa: E402 - after the path tweak that lets the script run from anywhere

ENTRIES = 4096
KEYS = 8192
OPERATIONS = 400_000
ROUNDS = 9


def _keys() -> list[int]:
    rng = random.Random(7)
    return [rng.randrange(KEYS) for _ in range(OPERATIONS)]


def _bounded(keys: list[int]) -> float:
    cache: Bounded[int, int] = Bounded(ENTRIES)
    start = time.perf_counter()
    for key in keys:
        if cache.get(key) is None:
            cache.put(key, key)
    return (time.perf_counter() - start) / len(keys) * 1e9


def _cachetools(keys: list[int]) -> float:
    from cachetools import LRUCache

    cache: LRUCache[int, int] = LRUCache(ENTRIES)
    lock = threading.Lock()
    start = time.perf_counter()
    for key in keys:
        with lock:
            value = cache.get(key)
        if value is None:
            with lock:
                cache[key] = key
    return (time.perf_counter() - start) / len(keys) * 1e9


def main() -> None:
    keys = _keys()
    try:
        import cachetools
    except ImportError:
        ours = statistics.median(_bounded(keys) for _ in range(ROUNDS))
        print(f"Bounded (providers/telemetry/cache.py): {ours:.0f} ns per get or get+put")
        print("cachetools is not installed: nothing to compare with (pip install cachetools)")
        return
    # Interleaved, so that both meet the machine in the same state.
    rounds = [(_bounded(keys), _cachetools(keys)) for _ in range(ROUNDS)]
    ours = statistics.median(r[0] for r in rounds)
    theirs = statistics.median(r[1] for r in rounds)
    print(f"Bounded (providers/telemetry/cache.py): {ours:.0f} ns per get or get+put")
    print(f"cachetools {cachetools.__version__} LRUCache behind a lock: {theirs:.0f} ns per get or get+put")
    print(f"ratio Bounded / cachetools: {ours / theirs:.2f}")


if __name__ == "__main__":
    main()

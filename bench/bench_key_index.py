"""The CDC writer's key index against the dict it replaced: rows/s and bytes per key.

Run: ``python bench/bench_key_index.py [keys ...]`` (default 1,000,000). The stream is
the one of ``bench_delta.py`` (88% inserts of new ids, 10% updates, 2% deletes, in
batches of 10,000), reduced to the key work of one CDC writer per batch: look up the
first row of each key, forget deleted keys, remember kept ones (the index probes each
key of a batch once and settles its final position, as the writer does). Baseline in the same
run: the dict map (one Python entry per key, values materialized by ``key_values``),
interleaved with the index, 3 timed rounds each (no tracing), medians. Memory comes
from one more run under tracemalloc (NumPy and Python objects are both counted): what
stays allocated per live key at the end, and the peak above the start.
"""

from __future__ import annotations

import statistics
import sys
import time
import tracemalloc
from collections import deque
from collections.abc import Hashable
from itertools import repeat
from typing import Protocol

import numpy as np
import pyarrow as pa

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from bench_delta import stream

from stream_sink.lookup.key_index import KeyIndex
from stream_sink.lookup.key_values import dense_key_ids, key_values
from stream_sink.write.change_plan import (
    OP_SKIP,
    decode_row_kinds,
    link_keys,
    ops_for,
    plan_changes,
)

Column = pa.ChunkedArray | pa.Array


class KeyMap(Protocol):
    def lookup(self, keys: list[Column], rows: np.ndarray) -> np.ndarray: ...
    def forget(self, keys: list[Column], rows: np.ndarray) -> None: ...
    def remember(self, keys: list[Column], rows: np.ndarray, at: np.ndarray) -> None: ...
    def __len__(self) -> int: ...


class DictMap:
    """The map before the index: a dict entry per key (as the writer did it)."""

    def __init__(self) -> None:
        self.live: dict[Hashable, int] = {}

    def __len__(self) -> int:
        return len(self.live)

    @property
    def keys(self) -> int:
        return len(self.live)

    def lookup(self, keys: list[Column], rows: np.ndarray) -> np.ndarray:
        found = map(self.live.get, key_values(keys, rows), repeat(-1))
        return np.fromiter(found, dtype=np.int64, count=len(rows))

    def forget(self, keys: list[Column], rows: np.ndarray) -> None:
        if len(rows) and self.live:
            deque(map(self.live.pop, key_values(keys, rows), repeat(None)), maxlen=0)

    def remember(self, keys: list[Column], rows: np.ndarray, at: np.ndarray) -> None:
        if len(rows):
            self.live.update(zip(key_values(keys, rows), at.tolist(), strict=True))


def prepared(batches: list[pa.Table]) -> list[tuple[list[Column], np.ndarray]]:
    out = []
    for batch in batches:
        ops = ops_for(decode_row_kinds(batch.column("_row_kind"), "_row_kind", "bench"), True)
        keep = np.flatnonzero(ops != OP_SKIP)
        out.append(([batch.column("id").take(pa.array(keep))], ops[keep]))
    return out


def run(live: KeyMap, batches: list[tuple[list[Column], np.ndarray]]) -> float:
    if isinstance(live, KeyIndex):
        return run_index(live, batches)
    position, start = 0, time.perf_counter()
    for keys, ops in batches:
        links = link_keys(*dense_key_ids(keys))
        known = np.full(len(ops), -1, dtype=np.int64)
        if len(live):
            firsts = np.flatnonzero(links.previous < 0)
            known[firsts] = live.lookup(keys, firsts)
        plan = plan_changes(ops, links, known, True)
        at = np.arange(position, position + len(plan.inserts))
        position += len(plan.inserts)
        live.forget(keys, plan.dropped_rows)
        live.remember(keys, plan.kept_rows, at[plan.kept_inserts])
    return time.perf_counter() - start


def run_index(live: KeyIndex, batches: list[tuple[list[Column], np.ndarray]]) -> float:
    """The CDC writer's path: each key of a batch probed once (``find``), its final
    position set once (``settle``)."""
    position, start = 0, time.perf_counter()
    for keys, ops in batches:
        links = link_keys(*dense_key_ids(keys))
        probe = live.find(keys, links.firsts)
        known = np.full(len(ops), -1, dtype=np.int64)
        known[links.firsts] = live.positions(probe)
        plan = plan_changes(ops, links, known, True)
        at = np.arange(position, position + len(plan.inserts))
        position += len(plan.inserts)
        live.settle(keys, probe, np.where(plan.final_inserts >= 0, at[plan.final_inserts], -1))
    return time.perf_counter() - start


def memory(make: type, batches: list[tuple[list[Column], np.ndarray]]) -> tuple[int, int, int]:
    """Bytes held at the end, peak bytes, live keys (one traced run)."""
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    live = make()
    run(live, batches)
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    keys = live.keys if isinstance(live, DictMap) else live.live
    return held - base, peak - base, keys


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [1_000_000]
    for rows in sizes:
        batches = prepared(stream(rows, 10_000))
        makers = {"dict": DictMap, "index": KeyIndex}
        times: dict[str, list[float]] = {name: [] for name in makers}
        for _ in range(3):
            for name, make in makers.items():
                times[name].append(run(make(), batches))  # type: ignore[abstract]
        base = statistics.median(times["dict"])
        print(f"{rows:,} change rows in batches of 10,000")
        for name, make in makers.items():
            elapsed = statistics.median(times[name])
            held, peak, keys = memory(make, batches)
            print(
                f"{name:>6}: {rows / elapsed:>11,.0f} rows/s  ratio {base / elapsed:5.2f}x "
                f"of dict  {held / keys:6.1f} B/live key ({keys:,} keys)  "
                f"peak +{peak / 2**20:6.1f} MiB"
            )


if __name__ == "__main__":
    main()

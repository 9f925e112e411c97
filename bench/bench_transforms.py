"""Partition transforms on 1,000,000 values: numpy kernels vs pyiceberg-core (Rust).

Run: ``python bench/bench_transforms.py [rows]``. Prints the best of several runs
for each kernel and the ratio numpy / pyiceberg-core (above 1 means the Rust
kernels are faster). The numpy kernels (what stream_sink uses) are the baseline
measured in the same run; pyiceberg-core is called directly on the same arrays.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from stream_sink.table import transforms as tr
from stream_sink.table.types import IcebergType, LongType, StringType, TimestampType

try:
    from pyiceberg_core import transform as core
except ImportError:  # pragma: no cover
    core = None


def _data(rows: int) -> dict[str, tuple[pa.Array, IcebergType]]:
    rng = np.random.default_rng(7)
    longs = rng.integers(-(2**62), 2**62, rows)
    micros = rng.integers(-(10**15), 4 * 10**15, rows)
    words = rng.integers(5, 40, rows)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)
    offsets = np.concatenate([[0], np.cumsum(words)]).astype(np.int32)
    chars = alphabet[rng.integers(0, len(alphabet), int(offsets[-1]))]
    strings = pa.Array.from_buffers(
        pa.string(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(chars.tobytes())]
    )
    return {
        "long": (pa.array(longs, pa.int64()), LongType()),
        "string": (strings, StringType()),
        "timestamp": (pa.array(micros, pa.timestamp("us")), TimestampType()),
    }


def _best(fn: Callable[[], object], repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _numpy(transform: tr.Transform, arr: pa.Array, t: IcebergType) -> Callable[[], object]:
    return lambda: transform.apply(arr, t)


def _core(name: str, arr: pa.Array, *args: int) -> Callable[[], object] | None:
    if core is None:
        return None
    fn = getattr(core, name)
    return lambda: fn(arr, *args)


def main(rows: int) -> None:
    data = _data(rows)
    cases: list[tuple[str, str, tr.Transform, Callable[[], object] | None]] = []
    for key in ("long", "string", "timestamp"):
        arr, _ = data[key]
        cases.append((key, "bucket[16]", tr.Bucket(16), _core("bucket", arr, 16)))
    for key in ("long", "string"):
        arr, _ = data[key]
        cases.append((key, "truncate[4]", tr.Truncate(4), _core("truncate", arr, 4)))
    arr, _ = data["timestamp"]
    for name, transform in (("day", tr.Day()), ("hour", tr.Hour()), ("month", tr.Month())):
        cases.append(("timestamp", name, transform, _core(name, arr)))

    print(f"{rows:,} values; best of 5 runs")
    print(f"{'type':<10} {'transform':<12} {'numpy ms':>9} {'core ms':>9} {'numpy/core':>11}")
    for key, name, transform, core_run in cases:
        arr, t = data[key]
        np_s = _best(_numpy(transform, arr, t))
        core_s = _best(core_run) if core_run else float("nan")
        print(f"{key:<10} {name:<12} {np_s * 1e3:9.1f} {core_s * 1e3:9.1f} {np_s / core_s:10.1f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)

"""Driver memory of the Delta Data Source route's CDC commit: keys held vs spilled.

    python bench/bench_delta_spilled_keys.py [--keys 1000000 4000000] [--tasks 8]

For each batch size N (distinct int64 keys, split over ``--tasks`` tasks by hash), the
commit's key work runs in a fresh child process against a Delta table of 8 files whose
key ranges overlap every batch (so every file is read and joined):

Table ids are odd and batch keys even: every file is a candidate (its id range overlaps
the batch's), none holds a key, so what is measured is holding and joining the keys,
not rewriting files.

- ``held`` (before): the tasks' keys arrive as Arrow IPC plus their 64-bit hashes, the
  commit concatenates the hashes to check them disjoint, concatenates the keys and
  anti-joins them from each file (``rewrite_touched``);
- ``spilled`` (now, beyond ``driver-key-limit``): the tasks' keys are in spill files,
  the commit checks the hashes a range at a time and streams the keys chunk by chunk
  against each file (``rewrite_spilled``).

The child reports its peak resident memory above what it had after its imports
(``VmHWM`` reset through ``/proc/self/clear_refs``) and the wall time; the table ratio
is spilled / held in the same run.
"""

from __future__ import annotations

import argparse
import json
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

TABLE_KEYS = 200_000


def hashes(keys: pa.Table) -> np.ndarray:
    return pd.util.hash_pandas_object(keys.to_pandas(), index=False).to_numpy(dtype=np.uint64)


def prepare(root: Path, n: int, tasks: int) -> None:
    from stream_sink.delta import DeltaTable
    from stream_sink.delta.key_spill import write_spill
    from stream_sink.io.fileio import FileIO

    table = DeltaTable.create(str(root / "t"), pa.schema([("id", pa.int64()), ("v", pa.int64())]))
    step = max(n // TABLE_KEYS, 1)
    for f in range(8):  # every file spans the batch's key range, odd ids: no key hits
        ids = 2 * np.arange(f, TABLE_KEYS, 8, dtype=np.int64) * step + 1
        table.append(pa.table({"id": ids, "v": np.zeros(len(ids), np.int64)}))
    keys = pa.table({"id": 2 * np.random.default_rng(1).permutation(n).astype(np.int64)})
    h = hashes(keys)
    part = h % np.uint64(tasks)
    held, spills = [], []
    io = FileIO.for_location(str(root / "spill"))
    for t in range(tasks):
        mine = keys.filter(pa.array(part == t))
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, mine.schema) as w:
            w.write_table(mine)
        held.append((np.unique(h[part == t]).tobytes(), sink.getvalue().to_pybytes()))
        spills.append(write_spill(io, str(root / "spill"), mine, h[part == t]))
    (root / "held.pkl").write_bytes(pickle.dumps(held))
    (root / "spilled.pkl").write_bytes(pickle.dumps(spills))


def child(root: Path, way: str) -> None:
    from stream_sink.delta import DeltaTable
    from stream_sink.delta.key_spill import rewrite_spilled, shared_keys
    from stream_sink.delta.merge import rewrite_touched
    from stream_sink.io.fileio import FileIO

    table = DeltaTable.load(str(root / "t"))
    Path("/proc/self/clear_refs").write_text("5")
    base = _status("VmRSS")
    started = time.perf_counter()
    if way == "held":
        outputs = pickle.loads((root / "held.pkl").read_bytes())
        every = np.concatenate([np.frombuffer(h, np.uint64) for h, _ in outputs])
        assert every.size == np.unique(every).size
        parts = [pa.ipc.open_stream(pa.py_buffer(raw)).read_all() for _, raw in outputs]
        del outputs
        batch = rewrite_touched(table.snapshot, table.io, pa.concat_tables(parts), ["id"])
    else:
        spills = pickle.loads((root / "spilled.pkl").read_bytes())
        io = FileIO.for_location(str(root / "spill"))
        assert shared_keys(io, spills) == 0
        batch = rewrite_spilled(table.snapshot, table.io, io, spills, ["id"], memory_keys=0)
    seconds = time.perf_counter() - started
    out = {"peak_mb": (_status("VmHWM") - base) / 1024, "s": seconds, "removed": len(batch.removes)}
    print(json.dumps(out))


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    raise KeyError(key)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--keys", type=int, nargs="+", default=[1_000_000, 4_000_000])
    p.add_argument("--tasks", type=int, default=8)
    p.add_argument("--child", nargs=2, default=None)
    a = p.parse_args()
    if a.child:
        child(Path(a.child[0]), a.child[1])
        return
    print(f"{'keys':>10}  {'held MB':>8} {'s':>6}  {'spilled MB':>10} {'s':>6}  ratio")
    for n in a.keys:
        root = Path(tempfile.mkdtemp(prefix="spilled-keys-"))
        try:
            prepare(root, n, a.tasks)
            got = {}
            for way in ("held", "spilled"):
                cmd = [sys.executable, __file__, "--child", str(root), way]
                got[way] = json.loads(subprocess.run(cmd, check=True, capture_output=True).stdout)
            assert got["held"]["removed"] == got["spilled"]["removed"]
            h, s = got["held"], got["spilled"]
            print(
                f"{n:>10}  {h['peak_mb']:>8.0f} {h['s']:>6.1f}  {s['peak_mb']:>10.0f} "
                f"{s['s']:>6.1f}  {s['peak_mb'] / h['peak_mb']:.2f}x",
                flush=True,
            )
        finally:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

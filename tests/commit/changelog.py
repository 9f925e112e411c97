"""A scripted changelog stream (Flink row kinds) and the table it must produce."""

from __future__ import annotations

import dataclasses
import random

import pyarrow as pa

from stream_sink.table.table import Table
from stream_sink.write.result import WriteResult
from stream_sink.write.writer_factory import TaskWriterFactory

Change = tuple[str, int, str]

BATCHES: list[list[Change]] = [
    [("+I", 1, "a0"), ("+I", 2, "b0"), ("+I", 3, "c0"), ("-U", 1, "a0"), ("+U", 1, "a1")],
    [("-U", 2, "b0"), ("+U", 2, "b1"), ("+I", 4, "d0"), ("-D", 3, "c0")],
    [("+I", 3, "c1"), ("-U", 1, "a1"), ("+U", 1, "a2"), ("-U", 1, "a2"), ("+U", 1, "a3")],
    [("-D", 4, "d0"), ("+I", 5, "e0"), ("-U", 2, "b1"), ("+U", 2, "b2")],
    [("+I", 6, "f0"), ("-D", 5, "e0"), ("+I", 5, "e1"), ("-U", 3, "c1"), ("+U", 3, "c2")],
    [("-U", 6, "f0"), ("+U", 6, "f1"), ("-D", 1, "a3"), ("+I", 7, "g0")],
]


TRUNCATE = "-T"
"""A TRUNCATE of the source table (its key and value are ignored)."""

TRUNCATING_BATCHES: list[list[Change]] = [
    *BATCHES[:2],
    # changes before the truncate in its batch are dropped, the ones after it land
    [("+I", 8, "h0"), ("-U", 1, "a1"), ("+U", 1, "a2"), (TRUNCATE, 0, ""), ("+I", 3, "c9")],
    [("+I", 9, "i0"), ("-U", 3, "c9"), ("+U", 3, "c10"), ("+I", 10, "j0")],
    [(TRUNCATE, 0, "")],  # a batch of a truncate alone
    [("+I", 11, "k0"), ("-D", 11, "k0"), ("+I", 12, "l0")],
]


def long_batches(batches: int = 80, seed: int = 7) -> list[list[Change]]:
    """A seeded stream of ``batches`` batches: each inserts two new keys and updates or
    deletes a few live ones, so old data files keep live rows that a compaction
    rewrites while later batches delete from them."""
    rng = random.Random(seed)
    live: dict[int, int] = {}
    out: list[list[Change]] = []
    for b in range(batches):
        batch: list[Change] = []
        for k in (2 * b, 2 * b + 1):
            batch.append(("+I", k, f"k{k}v0"))
            live[k] = 0
        for k in rng.sample(sorted(live), min(3, len(live))):
            if k in (2 * b, 2 * b + 1):
                continue
            if rng.random() < 0.2:
                batch.append(("-D", k, f"k{k}v{live.pop(k)}"))
            else:
                batch += [("-U", k, f"k{k}v{live[k]}"), ("+U", k, f"k{k}v{live[k] + 1}")]
                live[k] += 1
        out.append(batch)
    return out


CHANGELOGS = {"plain": BATCHES, "truncating": TRUNCATING_BATCHES}
LONG_BATCHES = long_batches()
"""Not in CHANGELOGS, which tests run one by one: ``crash_driver.py``'s ``long``."""


def expected_rows(batches: list[list[Change]] = BATCHES) -> list[tuple[int, str]]:
    table: dict[int, str] = {}
    for batch in batches:
        for kind, key, value in batch:
            if kind == TRUNCATE:
                table.clear()
            elif kind in ("+I", "+U"):
                table[key] = value
            else:
                table.pop(key, None)
    return sorted(table.items())


def write_changes(table: Table, changes: list[Change]) -> WriteResult:
    """The batch through the real CDC writer (equality field ``id``); a batch with
    a truncate writes the changes after its last one, as a truncating result (what the
    sinks do, ``stream_sink.spark.cdc.truncation``)."""
    cut = [i for i, c in enumerate(changes) if c[0] == TRUNCATE]
    if cut:
        rest = changes[cut[-1] + 1 :]
        written = write_changes(table, rest) if rest else WriteResult()
        return dataclasses.replace(written, truncate=True)
    factory = TaskWriterFactory.for_table(table, equality_fields=["id"])
    writer = factory.create(0, 0)
    writer.write(
        pa.table(
            {
                "id": pa.array([c[1] for c in changes], pa.int64()),
                "data": [c[2] for c in changes],
                "_row_kind": [c[0] for c in changes],
            }
        )
    )
    return writer.complete()

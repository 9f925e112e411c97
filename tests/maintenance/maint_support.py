"""CDC tables for the maintenance tests: random upsert batches written by the real delta
writers (equality deletes across batches, position deletes within one), one row delta
per batch, and the dict model of what the table must hold."""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from stream_sink.table.catalog import Catalog
from stream_sink.table.manifest import DataFileContent
from stream_sink.table.table import Table
from stream_sink.write.snapshot import commit_write_result
from stream_sink.write.writer_factory import TaskWriterFactory

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("cat", pa.string()),
        pa.field("v", pa.int64()),
    ]
)
Row = tuple[int, str, int]


@dataclass
class CdcTable:
    """A table plus the model of its rows (key -> row)."""

    table: Table
    rng: random.Random
    model: dict[int, Row] = field(default_factory=dict)
    next_id: int = 0

    def batch(self, n: int) -> list[tuple[str, Row]]:
        """``n`` random changes (inserts, updates of live or same-batch keys, deletes)."""
        out: list[tuple[str, Row]] = []
        for _ in range(n):
            r = self.rng.random()
            if not self.model or r < 0.45:
                row = (self.next_id, self.rng.choice("abc"), self.rng.randrange(1000))
                self.next_id += 1
                out.append(("+I", row))
                self.model[row[0]] = row
            elif r < 0.85:
                key = self.rng.choice(sorted(self.model))
                row = (key, self.model[key][1], self.rng.randrange(1000))
                out.append(("+U", row))
                self.model[key] = row
            else:
                key = self.rng.choice(sorted(self.model))
                out.append(("-D", self.model.pop(key)))
        return out

    def commit_batch(self, n: int) -> None:
        upsert(self.table, self.batch(n))

    def expected(self) -> list[Row]:
        return sorted(self.model.values())


def upsert(table: Table, changes: Sequence[tuple[str, Row]]) -> None:
    """One row delta of ``changes`` through the upsert CDC writer (key ``id``)."""
    factory = TaskWriterFactory.for_table(table, equality_fields=["id"], upsert=True)
    writer = factory.create(0, 0)
    writer.write(to_arrow(changes))
    commit_write_result(table, writer.complete())


def to_arrow(changes: Sequence[tuple[str, Row]]) -> pa.Table:
    kinds = pa.array([k for k, _ in changes], pa.string())
    cols = [pa.array([r[i] for _, r in changes], f.type) for i, f in enumerate(SCHEMA)]
    return pa.Table.from_arrays([kinds, *cols], names=["_row_kind", *SCHEMA.names])


def make_cdc_table(
    catalog: Catalog,
    name: str,
    *,
    batches: int,
    rows: int,
    seed: int = 0,
    partition_spec: Sequence[tuple[Any, ...]] = (),
    properties: dict[str, str] | None = None,
) -> CdcTable:
    table = catalog.create_table(
        name,
        schema=SCHEMA,
        partition_spec=list(partition_spec),
        identifier_fields=["id"],
        properties=properties or {},
    )
    cdc = CdcTable(table, random.Random(seed))
    for _ in range(batches):
        cdc.commit_batch(rows)
    return cdc


def ours(table: Table) -> list[Row]:
    t = table.refresh().scan().to_arrow()
    return sorted(zip(t["id"].to_pylist(), t["cat"].to_pylist(), t["v"].to_pylist(), strict=True))


def rows_of(records: list[dict[str, Any]]) -> list[Row]:
    return sorted((r["id"], r["cat"], r["v"]) for r in records)


def live_counts(table: Table) -> dict[str, int]:
    """Live data, position delete and equality delete files of the current snapshot."""
    from stream_sink.maintenance.inventory import inventory

    inv = inventory(table.refresh(), table.current_snapshot())
    kinds = [f.data_file.content for f in inv.deletes]
    return {
        "data": len(inv.data),
        "pos": kinds.count(DataFileContent.POSITION_DELETES),
        "eq": kinds.count(DataFileContent.EQUALITY_DELETES),
    }


def files_under(root: str) -> set[str]:
    out = set()
    for d, _, names in os.walk(root):
        out.update(os.path.join(d, n) for n in names)
    return out

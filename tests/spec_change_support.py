"""A keyed change stream written through the CDC writers (upsert or changelog mode)
next to the rows it must leave: shared by the spec-change tests with and without Java."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from stream_sink.table.arrow import schema_to_arrow
from stream_sink.table.snapshots import Snapshot
from stream_sink.tables import IcebergTable
from stream_sink.write.result import WriteResult
from stream_sink.write.snapshot import commit_write_result
from stream_sink.write.task_writers import write_through
from stream_sink.write.writer_factory import TaskWriterFactory

KEYS = 60


@dataclass
class ChangeStream:
    """Random upserts and deletes of ``KEYS`` keys; ``expected`` is what must be live.

    ``mode``: ``upsert`` (``+I`` rows, deletes as ``-D`` with the key) or ``changelog``
    (``+I``/``-U``/``+U``/``-D`` with full before images, as a CDC source sends them).
    Rows carry every column of the table's current schema (``extra`` once added).
    """

    mode: str
    seed: int = 7
    expected: dict[int, dict[str, Any]] = field(default_factory=dict)
    by_snapshot: dict[int, list[dict[str, Any]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._n = 0

    def write(self, table: IcebergTable, rows: int = 80) -> WriteResult:
        """One batch written with ``table``'s current schema and spec, not committed."""
        factory = TaskWriterFactory.for_table(
            table, equality_fields=["id"], upsert=self.mode == "upsert"
        )
        batch = self._batch(table, rows)
        return write_through(factory.create(partition_id=0, task_id=0), [batch])

    def commit(self, table: IcebergTable, result: WriteResult) -> Snapshot:
        snap = commit_write_result(table, result)
        self.by_snapshot[snap.snapshot_id] = self.rows()
        return snap

    def step(self, table: IcebergTable, rows: int = 80) -> Snapshot:
        return self.commit(table, self.write(table, rows))

    def rows(self) -> list[dict[str, Any]]:
        return [dict(r) for _, r in sorted(self.expected.items())]

    def _batch(self, table: IcebergTable, n: int) -> pa.Table:
        names = [f.name for f in table.schema().fields]
        out: list[dict[str, Any]] = []
        for _ in range(n):
            key = self._rng.randrange(KEYS)
            old = self.expected.get(key)
            if old is not None and self._rng.random() < 0.25:
                out.append({**old, "_row_kind": "-D"})
                del self.expected[key]
                continue
            self._n += 1
            new = {c: None for c in names}
            new.update(id=key, v=f"v{self._n}")
            if "extra" in names:
                new["extra"] = f"x{self._n}"
            if old is not None and self.mode == "changelog":
                out.append({**old, "_row_kind": "-U"})
            kind = "+U" if old is not None and self.mode == "changelog" else "+I"
            out.append({**new, "_row_kind": kind})
            self.expected[key] = new
        schema = schema_to_arrow(table.schema()).append(pa.field("_row_kind", pa.string()))
        return pa.Table.from_pylist(out, schema=schema)

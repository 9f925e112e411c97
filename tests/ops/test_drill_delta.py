"""The drill verifies a Delta table (``--table delta:PATH``) with stream_sink's reader and
DuckDB's delta extension."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from stream_sink.delta import DeltaTable
from stream_sink.ops.drill import verify
from stream_sink.ops.drill_jobs import JobSpec

EXPECTED = pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]})


def expected_rows(**context: Any) -> pa.Table:
    return EXPECTED


def test_drill_reads_a_delta_table_by_path_with_both_readers(tmp_path: Path) -> None:
    table = DeltaTable.create(str(tmp_path / "lake" / "t"), EXPECTED.schema)
    table.append(EXPECTED)
    table.append(EXPECTED.slice(1, 1))  # id 2 twice: a duplicate both readers must see
    context = {"work_dir": str(tmp_path), "warehouse": str(tmp_path / "warehouse")}
    job = JobSpec("m:run", "delta:lake/t", "m:rows")
    expected, readers = verify(job, context, expected_rows)
    assert expected == 3
    for name in ("stream_sink", "duckdb"):
        counts = readers[name]
        assert counts is not None, name
        assert (counts.rows, counts.duplicated, counts.missing) == (4, 1, 0), name

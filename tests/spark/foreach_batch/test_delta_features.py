"""DeltaSink appending and upserting into a Delta table with deletion vectors and
column mapping (written by delta-rs, upgraded as Delta does: see
``tests/delta_tables.py``), read back by delta-rs and DuckDB."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from delta_readers import by_key, delta_rs_query_rows, duckdb_delta_rows
from delta_tables import delta_rs_table_with_dvs_and_mapping
from streams import run_available, write_batches

from stream_sink.delta import DeltaTable
from stream_sink.delta.paths import absolute_location
from stream_sink.spark import DeltaSink

pytestmark = pytest.mark.spark


def _sink_run(spark: Any, tmp_path: Path, loc: str, name: str, batches: list, **options: Any):
    src = tmp_path / f"{name}-in"
    write_batches(src, batches)
    sink = DeltaSink(
        path=loc,
        checkpoint_location=str(tmp_path / f"chk-{name}"),
        state_dir=str(tmp_path / f"state-{name}"),
        **options,
    )
    try:
        schema = "id long, value string, seq long"
        run_available(spark, src, schema, sink.foreach_batch, sink.spark_checkpoint_location)
    finally:
        sink.close()


def _readers_agree(loc: str) -> dict[int, str]:
    ours = by_key(DeltaTable.load(loc).to_arrow().to_pylist(), "id")
    assert by_key(delta_rs_query_rows(loc), "id") == ours
    assert by_key(duckdb_delta_rows(loc), "id") == ours
    return {r["id"]: r["value"] for r in ours}


def test_sink_appends_and_upserts_into_a_table_with_dvs_and_column_mapping(
    spark: Any, tmp_path: Path
) -> None:
    loc = str(tmp_path / "t")
    delta_rs_table_with_dvs_and_mapping(loc)
    want = _readers_agree(loc)
    appends = [[{"id": 1000 + i, "value": f"n{i}", "seq": i} for i in range(3)]]
    _sink_run(spark, tmp_path, loc, "append", appends)
    want.update({1000 + i: f"n{i}" for i in range(3)})
    assert _readers_agree(loc) == want
    for a in DeltaTable.load(loc).snapshot.files.values():
        assert pq.read_schema(absolute_location(loc, a.path)).names == ["id", "v"]

    upserts = [
        [{"id": 3, "value": "u3", "seq": 1}, {"id": 2, "value": "u2", "seq": 2}],
        [{"id": 1001, "value": "u1001", "seq": 3}, {"id": 3, "value": "u3b", "seq": 4}],
    ]
    _sink_run(
        spark,
        tmp_path,
        loc,
        "upsert",
        upserts,
        mode="upsert",
        equality_fields=["id"],
        order_by="seq",
    )
    want.update({3: "u3b", 2: "u2", 1001: "u1001"})
    assert _readers_agree(loc) == want
    assert 5 not in want  # deleted by the table's first deletion vector, and still is
    files = DeltaTable.load(loc).snapshot.files.values()
    assert any(a.deletion_vector and a.deletion_vector["cardinality"] >= 3 for a in files)

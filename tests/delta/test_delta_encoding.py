"""Delta data files dictionary-encode only the columns where a dictionary pays, as
Delta Lake's own writer does; the files read back the same everywhere."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from stream_sink.delta import DeltaTable


def _rows(n: int) -> pa.Table:
    ids = pa.array(range(n), pa.int64())
    return pa.table(
        {
            "id": ids,
            "ts": pa.array(
                [1_714_521_600_000_000 + i * 1000 for i in range(n)], pa.timestamp("us", "UTC")
            ),
            "value": pa.array([i * 0.618033 for i in range(n)], pa.float64()),
            "category": pa.array([f"cat-{i % 20}" for i in range(n)]),
            "tags": pa.array([[f"t{i % 3}"] for i in range(n)], pa.list_(pa.string())),
            "maybe": pa.array([None] * n, pa.int64()),
        }
    )


def test_distinct_columns_are_written_plain_and_repeated_ones_with_a_dictionary(
    tmp_path: Path,
) -> None:
    from deltalake import DeltaTable as RsTable

    loc = tmp_path / "t"
    data = _rows(200_000)
    table = DeltaTable.create(str(loc), data.schema)
    table.append(data)

    (add,) = table.refresh().snapshot.files.values()
    meta = pq.ParquetFile(loc / add.path).metadata.row_group(0)
    with_dictionary = {
        meta.column(i).path_in_schema: meta.column(i).has_dictionary_page
        for i in range(meta.num_columns)
    }
    assert with_dictionary == {
        "id": False,
        "ts": False,
        "value": False,
        "category": True,
        "tags.list.element": True,
        "maybe": True,
    }
    assert all(meta.column(i).is_stats_set for i in range(meta.num_columns))
    assert all(meta.column(i).has_column_index for i in range(meta.num_columns))
    assert table.to_arrow().sort_by("id").equals(data)
    assert RsTable(str(loc)).to_pyarrow_table().sort_by("id").equals(data)

"""Scans skip Parquet row groups whose statistics rule out every row of the filter.

A skipped row group is proven unread by damaging its bytes on disk: the filtered scan
still returns the right rows, an unfiltered one fails on the damaged pages.

Tests stream_sink.read.row_groups: row groups skipped by their statistics.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from read_support import hadoop_catalog

from stream_sink.read import col
from stream_sink.table.table import Table

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("day", pa.date32()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
    ]
)
ROWS = 6_000
T0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)


def _rows() -> pa.Table:
    ids = list(range(ROWS))
    return pa.table(
        {
            "id": ids,
            "name": [f"n{i:05d}" if i % 11 else None for i in ids],
            "day": [dt.date(2024, 1, 1) + dt.timedelta(days=i // 100) for i in ids],
            "ts": [T0 + dt.timedelta(minutes=i) for i in ids],
        },
        schema=SCHEMA,
    )


@pytest.fixture
def table(tmp_path: Path) -> Table:
    t = hadoop_catalog(tmp_path).create_table(
        "db.t", schema=SCHEMA, properties={"write.parquet.row-group-size-bytes": "20000"}
    )
    t.append(_rows())
    return t


def _only_file(table: Table) -> str:
    [task] = list(table.scan().plan_files())
    return task.data_file.file_path


def _damage_row_group(path: str, row_group: int) -> None:
    """Overwrite every column chunk of one row group with garbage (same file size)."""
    meta = pq.ParquetFile(path).metadata.row_group(row_group)
    with open(path, "r+b") as f:
        for i in range(meta.num_columns):
            chunk = meta.column(i)
            start = chunk.dictionary_page_offset or chunk.data_page_offset
            f.seek(start)
            f.write(b"\xff" * chunk.total_compressed_size)


def _ids(table: Table, row_filter: object) -> list[int]:
    out = table.scan(row_filter=row_filter, columns=["id"]).to_arrow()  # type: ignore[arg-type]
    return sorted(out.column("id").to_pylist())


FILTERS = {
    "long": (col("id") >= 5_000, lambda i: i >= 5_000),
    "string": (col("name") > "n04999", lambda i: i >= 5_000 and i % 11 != 0),
    "date": (col("day") >= dt.date(2024, 2, 20), lambda i: i >= 5_000),
    "timestamp": (
        col("ts") >= T0 + dt.timedelta(minutes=5_000),
        lambda i: i >= 5_000,
    ),
    "in": (col("id").isin([5_500, 5_501, 7]), lambda i: i in (5_500, 5_501, 7)),
}


@pytest.mark.parametrize("kind", sorted(FILTERS))
def test_a_row_group_outside_the_filter_is_not_read(table: Table, kind: str) -> None:
    path = _only_file(table)
    groups = pq.ParquetFile(path).metadata
    assert groups.num_row_groups >= 3
    row_filter, keep = FILTERS[kind]
    expected = [i for i in range(ROWS) if keep(i)]
    assert _ids(table, row_filter) == expected
    # the middle row groups hold ids below 5,000 (and not 7): damage one of them
    middle = groups.num_row_groups // 2
    stats = groups.row_group(middle).column(0).statistics
    assert stats.min > 7 and stats.max < 5_000
    _damage_row_group(path, middle)
    assert _ids(table, row_filter) == expected
    with pytest.raises(Exception):  # noqa: B017 - any read error proves the damage
        table.scan(columns=["id", "name", "day", "ts"]).to_arrow()


def test_filters_that_statistics_cannot_decide_read_every_row_group(table: Table) -> None:
    assert _ids(table, col("name").is_null()) == [i for i in range(ROWS) if i % 11 == 0]
    assert _ids(table, col("id") != 3) == [i for i in range(ROWS) if i != 3]
    assert _ids(table, (col("id") < 10) | (col("id") > 5_990)) == [
        i for i in range(ROWS) if i < 10 or i > 5_990
    ]

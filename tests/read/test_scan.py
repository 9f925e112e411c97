"""TableScan over tables written by ``table.append``: rows, projection, filters,
streaming, time travel and the errors a user meets.

Tests stream_sink.read.arrow_filter: filters applied to rows as Arrow expressions."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from read_support import hadoop_catalog, write_data

from stream_sink.exceptions import (
    MissingFileError,
    NoSuchRefError,
    NoSuchSnapshotError,
    ValidationError,
)
from stream_sink.read import IncrementalAppendScan, TableScan, col
from stream_sink.table.arrow import FIELD_ID_KEY

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("ts", pa.timestamp("us")),
    ]
)


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": ids,
            "name": [f"n{i}" if i % 7 else None for i in ids],
            "ts": pa.array(
                [1_700_000_000_000_000 + i * 3_600_000_000 for i in ids], pa.int64()
            ).cast(pa.timestamp("us")),
        },
        schema=SCHEMA,
    )


@pytest.fixture
def table(tmp_path: Path):
    t = hadoop_catalog(tmp_path).create_table("db.t", schema=SCHEMA, identifier_fields=["id"])
    t.append(_rows(0, 100))
    t.append(_rows(100, 50))
    return t


def test_reads_every_row_with_the_table_schema(table) -> None:
    out = table.scan().to_arrow()
    assert sorted(out.column("id").to_pylist()) == list(range(150))
    assert out.schema.names == ["id", "name", "ts"]
    assert [f.metadata[FIELD_ID_KEY] for f in out.schema] == [b"1", b"2", b"3"]
    assert table.scan().count() == 150


def test_projection_keeps_the_asked_order(table) -> None:
    out = table.scan(columns=["ts", "id"]).to_arrow()
    assert out.schema.names == ["ts", "id"]
    assert out.num_rows == 150


def test_filter_expression_and_string_agree(table) -> None:
    by_expr = table.scan(row_filter=(col("id") >= 40) & (col("id") < 60) & col("name").not_null())
    by_text = table.scan(row_filter="id >= 40 and id < 60 and name is not null")
    expected = sorted(i for i in range(40, 60) if i % 7)
    assert sorted(by_expr.to_arrow().column("id").to_pylist()) == expected
    assert sorted(by_text.to_arrow().column("id").to_pylist()) == expected
    assert by_text.count() == len(expected)


def test_filter_on_timestamp_with_iso_string(table) -> None:
    cut = 1_700_000_000 + 140 * 3600
    import datetime as dt

    iso = dt.datetime.fromtimestamp(cut, dt.timezone.utc).replace(tzinfo=None).isoformat()
    out = table.scan(row_filter=f"ts >= '{iso}'", columns=["id"]).to_arrow()
    assert sorted(out.column("id").to_pylist()) == list(range(140, 150))


def test_filter_on_a_column_not_projected(table) -> None:
    out = table.scan(row_filter=col("name").is_null(), columns=["id"]).to_arrow()
    assert out.schema.names == ["id"]
    assert sorted(out.column("id").to_pylist()) == [i for i in range(150) if i % 7 == 0]


def test_not_in_and_negation(table) -> None:
    out = table.scan(row_filter=~(col("id").isin(range(10, 150))) & (col("id") != 3)).to_arrow()
    assert sorted(out.column("id").to_pylist()) == [0, 1, 2, 4, 5, 6, 7, 8, 9]


def test_batches_and_reader_stream_the_same_rows(table) -> None:
    scan = table.scan(row_filter="id < 120")
    batches = list(scan.to_batches())
    assert len(batches) >= 2  # one per file at least
    reader = scan.to_reader()
    assert reader.schema == scan.to_arrow().schema
    assert sorted(reader.read_all().column("id").to_pylist()) == list(range(120))
    assert sum(b.num_rows for b in batches) == 120


def test_empty_table_gives_empty_result_with_schema(tmp_path: Path) -> None:
    t = hadoop_catalog(tmp_path).create_table("db.e", schema=SCHEMA)
    out = t.scan().to_arrow()
    assert out.num_rows == 0
    assert out.schema.names == ["id", "name", "ts"]
    assert t.scan().count() == 0
    assert list(t.scan().to_batches()) == []
    assert t.scan(ref="main").to_arrow().num_rows == 0


def test_filter_matching_nothing_gives_empty_result(table) -> None:
    out = table.scan(row_filter=col("id") > 10_000, columns=["name"]).to_arrow()
    assert out.num_rows == 0 and out.schema.names == ["name"]


def test_time_travel_by_id_timestamp_and_ref(table) -> None:
    first, second = table.snapshots()
    assert table.scan(snapshot_id=first.snapshot_id).count() == 100
    assert table.scan(snapshot_id=second.snapshot_id).to_arrow().num_rows == 150
    assert table.scan(as_of_ms=first.timestamp_ms).to_arrow().num_rows == 100
    assert table.scan(ref="main").to_arrow().num_rows == 150


def test_branch_reads_its_own_head(table) -> None:
    table.append(_rows(1000, 5), branch="audit")
    assert table.scan(ref="audit").to_arrow().num_rows == 155
    assert table.scan().to_arrow().num_rows == 150


def test_unknown_snapshot_ref_and_time_are_named(table) -> None:
    with pytest.raises(NoSuchSnapshotError, match="12345"):
        table.scan(snapshot_id=12345)
    with pytest.raises(NoSuchRefError, match="nightly"):
        table.scan(ref="nightly")
    with pytest.raises(NoSuchSnapshotError, match=" 1 ms"):
        table.scan(as_of_ms=1)
    with pytest.raises(ValidationError, match="only one"):
        table.scan(snapshot_id=table.current_snapshot().snapshot_id, ref="main")


def test_unknown_column_in_filter_or_projection_is_named(table) -> None:
    with pytest.raises(ValidationError, match="'nope'"):
        table.scan(row_filter=col("nope") == 1)
    with pytest.raises(ValidationError, match="'nope'"):
        table.scan(row_filter="nope = 1")
    with pytest.raises(ValidationError, match="'nope'"):
        table.scan(columns=["id", "nope"])
    with pytest.raises(ValidationError, match="'name'"):
        table.scan(row_filter=col("name") == 5)


def test_missing_data_file_names_file_and_table(table) -> None:
    victim = TableScan(table).plan_files()[0].data_file.file_path
    os.remove(victim)
    with pytest.raises(MissingFileError) as err:
        table.scan().to_arrow()
    assert victim in str(err.value) and "db.t" in str(err.value)


def test_incremental_append_scan(table) -> None:
    s1, s2 = (s.snapshot_id for s in table.snapshots())
    s3 = table.append(_rows(200, 10)).snapshot_id
    only_new = IncrementalAppendScan(table, s1, s3).to_arrow()
    assert sorted(only_new.column("id").to_pylist()) == [*range(100, 150), *range(200, 210)]
    assert IncrementalAppendScan(table, s2, s2).to_arrow().num_rows == 0
    assert IncrementalAppendScan(table, None, s1).count() == 100
    filtered = IncrementalAppendScan(table, s1, None, row_filter="id >= 205", columns=["id"])
    assert sorted(filtered.to_arrow().column("id").to_pylist()) == list(range(205, 210))


def test_incremental_append_scan_skips_non_appends_and_checks_ancestry(table) -> None:
    s2 = table.current_snapshot().snapshot_id
    table.append(_rows(900, 2), branch="side")  # forks from s2
    side = table.snapshot_for_ref("side").snapshot_id
    more = write_data(table, _rows(500, 3))
    op = table.new_overwrite()
    for f in more:
        op.add_file(f)
    s3 = op.commit().snapshot_id
    assert IncrementalAppendScan(table, s2, s3).to_arrow().num_rows == 0
    assert IncrementalAppendScan(table, s2, side).count() == 2
    with pytest.raises(ValidationError, match="not an ancestor"):
        IncrementalAppendScan(table, s3, side)
    with pytest.raises(NoSuchSnapshotError, match="777"):
        IncrementalAppendScan(table, 777, s3)


def test_a_current_read_after_adding_a_column_has_it_and_time_travel_does_not(
    tmp_path: Path,
) -> None:
    import stream_sink as ss

    catalog = ss.load_catalog("local", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    t = catalog.create_table("db.t", pa.schema([("id", pa.int64())]))
    t.append(pa.table({"id": [1]}))
    first = t.current_snapshot()
    assert first is not None
    with t.update_schema() as update:
        update.add_column("note", "string")
    assert t.scan().to_arrow().to_pylist() == [{"id": 1, "note": None}]
    assert t.scan(ref="main").to_arrow().column_names == ["id", "note"]
    assert t.scan(snapshot_id=first.snapshot_id).to_arrow().column_names == ["id"]

"""Task writers: unpartitioned and fanout, their factory, bad input and abort."""

from __future__ import annotations

import pickle
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from readers import duckdb_rows, pyiceberg_rows, sorted_rows

from stream_sink.exceptions import SchemaMismatchError
from stream_sink.table.catalog import Catalog
from stream_sink.table.table import Table
from stream_sink.write.snapshot import commit_write_result
from stream_sink.write.task_writers import PartitionedFanoutWriter, UnpartitionedWriter
from stream_sink.write.writer_factory import TaskWriterFactory

ARROW = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), ("cat", pa.string()), ("v", pa.float64())]
)


def rows(start: int, n: int, cats: int = 5) -> pa.Table:
    return pa.table(
        {
            "id": range(start, start + n),
            "cat": [None if i % 11 == 0 else f"c{i % cats}" for i in range(start, start + n)],
            "v": [i / 3 for i in range(start, start + n)],
        },
        schema=ARROW,
    )


def data_files_on_disk(table: Table) -> list[Path]:
    root = Path(table.data_location)
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def test_factory_picks_the_writer_for_the_table(catalog: Catalog) -> None:
    plain = catalog.create_table("db.plain", ARROW)
    parted = catalog.create_table("db.parted", ARROW, partition_spec=[("identity", "cat")])
    assert isinstance(TaskWriterFactory.for_table(plain).create(0, 0), UnpartitionedWriter)
    assert isinstance(TaskWriterFactory.for_table(parted).create(0, 0), PartitionedFanoutWriter)


def test_unpartitioned_writer_round_trip(catalog: Catalog) -> None:
    table = catalog.create_table("db.t", ARROW)
    writer = TaskWriterFactory.for_table(table).create(3, 7, 1)
    writer.write(rows(0, 500))
    writer.write(rows(500, 500).to_batches()[0])
    result = writer.complete()
    assert [f.record_count for f in result.data_files] == [1000]
    assert Path(result.data_files[0].file_path).name.startswith("00003-7-")
    commit_write_result(table, result)
    expected = rows(0, 1000).to_pylist()
    assert sorted_rows(duckdb_rows(table.metadata_location), "id") == expected
    assert sorted_rows(pyiceberg_rows(table.metadata_location), "id") == expected


def test_fanout_writes_one_file_per_partition_with_its_rows(catalog: Catalog) -> None:
    table = catalog.create_table("db.t", ARROW, partition_spec=[("identity", "cat")])
    writer = TaskWriterFactory.for_table(table).create(0, 0)
    for start in range(0, 1000, 100):
        writer.write(rows(start, 100))
    result = writer.complete()
    assert len(result.data_files) == 6  # c0..c4 and null
    for f in result.data_files:
        cats = set(pq.read_table(f.file_path).column("cat").to_pylist())
        assert cats == {f.partition[0]}
        ids = pq.read_table(f.file_path).column("id").to_pylist()
        assert ids == sorted(ids)  # input order kept inside a partition
    commit_write_result(table, result)
    assert sorted_rows(duckdb_rows(table.metadata_location), "id") == rows(0, 1000).to_pylist()


def test_fanout_over_the_open_file_cap_finishes_the_least_recent(catalog: Catalog) -> None:
    table = catalog.create_table(
        "db.t",
        ARROW,
        partition_spec=[("identity", "cat")],
        properties={"write.fanout.max-open-files": "2"},
    )
    writer = TaskWriterFactory.for_table(table).create(0, 0)

    def only(cat: str, start: int) -> pa.Table:
        return pa.table(
            {"id": range(start, start + 10), "cat": [cat] * 10, "v": [1.0] * 10}, schema=ARROW
        )

    # a, b fill the cap; c finishes a; a again finishes b and opens a second file for a
    for i, cat in enumerate(["a", "b", "c", "a", "c"]):
        writer.write(only(cat, i * 10))
    result = writer.complete()
    per_partition: dict[Any, int] = {}
    for f in result.data_files:
        per_partition[f.partition[0]] = per_partition.get(f.partition[0], 0) + 1
    assert per_partition == {"a": 2, "b": 1, "c": 1}
    assert sum(f.record_count for f in result.data_files) == 50
    commit_write_result(table, result)
    assert len(duckdb_rows(table.metadata_location)) == 50


def test_fanout_buffer_cap_writes_row_groups_early(catalog: Catalog) -> None:
    table = catalog.create_table(
        "db.t",
        ARROW,
        partition_spec=[("identity", "cat")],
        properties={"write.fanout.max-buffered-bytes": "20000"},
    )
    writer = TaskWriterFactory.for_table(table).create(0, 0)
    for start in range(0, 20_000, 1000):
        writer.write(rows(start, 1000, cats=2))
    result = writer.complete()
    groups = [pq.read_metadata(f.file_path).num_row_groups for f in result.data_files]
    assert max(groups) > 1
    assert sum(f.record_count for f in result.data_files) == 20_000


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (pa.table({"id": ["x"], "cat": ["a"], "v": [1.0]}), "'id'"),
        (pa.table({"cat": ["a"], "v": [1.0]}), "required column 'id' is missing"),
        (
            pa.table({"id": [1, None], "cat": ["a", "b"], "v": [1.0, 2.0]}),
            "'id' has a null at row 1",
        ),
        (
            pa.table({"id": [1], "cat": ["a"], "v": [1.0], "extra": [1]}),
            "'extra' is not in the table",
        ),
    ],
)
@pytest.mark.parametrize("partitioned", [False, True])
def test_bad_input_names_the_column_and_leaves_no_file(
    catalog: Catalog, bad: pa.Table, message: str, partitioned: bool
) -> None:
    spec = [("identity", "cat")] if partitioned else None
    table = catalog.create_table("db.t", ARROW, partition_spec=spec)
    writer = TaskWriterFactory.for_table(table).create(0, 0)
    writer.write(rows(0, 100))
    with pytest.raises(SchemaMismatchError, match=message):
        writer.write(bad)
    writer.abort()
    assert data_files_on_disk(table) == []


def test_abort_after_complete_removes_every_file(catalog: Catalog) -> None:
    table = catalog.create_table(
        "db.t",
        ARROW,
        partition_spec=[("bucket", "id", 4)],
        properties={"write.target-file-size-bytes": "2048"},
    )
    writer = TaskWriterFactory.for_table(table).create(0, 0)
    writer.write(rows(0, 20_000))
    result = writer.complete()
    assert len(result.data_files) > 4
    assert len(data_files_on_disk(table)) == len(result.data_files)
    writer.abort()
    assert data_files_on_disk(table) == []


def test_factory_survives_pickling_and_writes_the_same(catalog: Catalog) -> None:
    table = catalog.create_table(
        "db.t", ARROW, partition_spec=[("truncate", "cat", 1), ("bucket", "id", 3)]
    )
    factory = TaskWriterFactory.for_table(table, operation_id="op")
    copy = pickle.loads(pickle.dumps(factory))
    assert copy == factory
    results = []
    for f, attempt in ((factory, 0), (copy, 1)):
        writer = f.create(0, 0, attempt)
        writer.write(rows(0, 300))
        results.append(writer.complete())
    ours, theirs = results
    assert {f.file_path for f in ours.data_files}.isdisjoint(f.file_path for f in theirs.data_files)

    def without_path(r: Any) -> list[Any]:
        return sorted(
            (replace(f, file_path="") for f in r.data_files), key=lambda f: repr(f.partition)
        )

    assert without_path(ours) == without_path(theirs)


def test_fanout_counts_nan_per_file_whether_or_not_the_batch_has_any(catalog: Catalog) -> None:
    """A batch with NaN in one partition only, then a batch without any: each file's
    nan_value_counts equals the NaNs in its own rows."""
    table = catalog.create_table("db.t", ARROW, partition_spec=[("identity", "cat")])
    with_nan = rows(0, 300).set_column(
        2, "v", pa.array([float("nan") if i % 5 == 1 else i / 3 for i in range(300)])
    )
    writer = TaskWriterFactory.for_table(table).create(0, 0)
    writer.write(with_nan)
    writer.write(rows(300, 300))
    files = writer.complete().data_files
    v = table.schema().find_field("v").field_id
    counts = {f.partition: (f.nan_value_counts or {}).get(v, 0) for f in files}
    written = {
        f.partition: sum(
            x != x for x in pq.read_table(f.file_path, columns=["v"]).column("v").to_pylist()
        )
        for f in files
    }
    assert counts == written
    assert sum(counts.values()) == 60  # i % 5 == 1: category c1, or null when i % 11 == 0
    assert {p for p, n in counts.items() if n} == {("c1",), (None,)}

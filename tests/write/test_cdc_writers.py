"""CDC writers, named after Iceberg's TestDeltaTaskWriter.

Each "task" is one writer whose WriteResult is committed as its own row delta, as the
sink does per batch; the table is then read back by DuckDB (equality deletes) and,
where only position deletes exist, also by pyiceberg.

Tests stream_sink.write.deletes: the equality and position delete files.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from readers import duckdb_connection, pyiceberg_rows

from stream_sink.exceptions import (
    InvalidOptionError,
    MissingColumnError,
    NullKeyError,
    SchemaMismatchError,
    UnknownRowKindError,
)
from stream_sink.table.catalog import Catalog
from stream_sink.table.manifest import DataFile, DataFileContent
from stream_sink.table.metrics_config import DELETE_FILE_PATH_ID
from stream_sink.table.table import Table
from stream_sink.write.cdc_writers import PartitionedDeltaWriter, UnpartitionedDeltaWriter
from stream_sink.write.result import WriteResult
from stream_sink.write.snapshot import commit_write_result
from stream_sink.write.writer_factory import TaskWriterFactory

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("data", pa.string())])
TS_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us"), nullable=False),
        pa.field("data", pa.string()),
    ]
)
Row = tuple[Any, ...]


# --- helpers -------------------------------------------------------------------------


def create(
    catalog: Catalog,
    spec: Sequence[tuple[Any, ...]] = (),
    schema: pa.Schema = SCHEMA,
    properties: dict[str, str] | None = None,
) -> Table:
    return catalog.create_table(
        "db.t",
        schema=schema,
        partition_spec=list(spec),
        identifier_fields=["id"],
        properties=properties or {},
    )


def changes(*rows: Row, schema: pa.Schema = SCHEMA) -> pa.Table:
    """A change batch: the row kind first, then the table columns."""
    kinds = pa.array([r[0] for r in rows], pa.string())
    columns = [pa.array([r[i + 1] for r in rows], f.type) for i, f in enumerate(schema)]
    return pa.Table.from_arrays([kinds, *columns], names=["_row_kind", *schema.names])


def run_task(
    table: Table,
    batches: Sequence[pa.Table],
    keys: Sequence[str] = ("id",),
    upsert: bool = False,
    task_id: int = 0,
    **options: Any,
) -> WriteResult:
    """Write ``batches`` with one CDC writer and commit its result as one row delta."""
    factory = TaskWriterFactory.for_table(
        table, equality_fields=list(keys), upsert=upsert, cdc_options=options
    )
    writer = factory.create(partition_id=0, task_id=task_id)
    for batch in batches:
        writer.write(batch)
    result = writer.complete()
    commit_write_result(table, result)
    return result


_DUCKDB: list[Any] = []


def table_rows(table: Table, *columns: str) -> list[Row]:
    """The table's rows as DuckDB reads them (one connection for the module: loading
    the extensions is the slow part)."""
    if not _DUCKDB:
        _DUCKDB.append(duckdb_connection())
    location = table.metadata_location.replace("'", "''")
    names = ", ".join(columns or ("id", "data"))
    return sorted(_DUCKDB[0].execute(f"SELECT {names} FROM iceberg_scan('{location}')").fetchall())


def of(result: WriteResult, content: DataFileContent) -> list[DataFile]:
    return [f for f in result.delete_files if f.content == content]


def file_rows(f: DataFile) -> list[dict[str, Any]]:
    return pq.read_table(f.file_path).to_pylist()


def files_under(path: str) -> list[str]:
    return sorted(os.path.join(d, n) for d, _, names in os.walk(path) for n in names)


# --- TestDeltaTaskWriter ---------------------------------------------------------------


def test_unpartitioned(catalog: Catalog) -> None:
    table = create(catalog)
    first = run_task(
        table,
        [
            changes(("+I", 1, "aaa"), ("+I", 2, "bbb"), ("+I", 3, "ccc")),
            changes(("-U", 1, "aaa"), ("+U", 1, "AAA"), ("-D", 2, "bbb"), ("+I", 4, "ddd")),
        ],
    )
    # updates of rows this task wrote: position deletes only
    assert [f.record_count for f in first.data_files] == [5]
    assert of(first, DataFileContent.EQUALITY_DELETES) == []
    [positions] = of(first, DataFileContent.POSITION_DELETES)
    data_path = first.data_files[0].file_path
    assert file_rows(positions) == [
        {"file_path": data_path, "pos": 0},
        {"file_path": data_path, "pos": 1},
    ]
    assert first.referenced_data_files == (data_path,)
    assert table_rows(table) == [(1, "AAA"), (3, "ccc"), (4, "ddd")]

    second = run_task(
        table,
        [
            changes(
                ("-U", 3, "ccc"),
                ("+U", 3, "CCC"),
                ("-D", 4, "ddd"),
                ("+I", 5, "eee"),
                ("-D", 5, "eee"),
            )
        ],
        task_id=1,
    )
    # rows of an earlier commit: equality deletes carrying the full row
    [equality] = of(second, DataFileContent.EQUALITY_DELETES)
    assert equality.equality_ids == (1,)
    assert file_rows(equality) == [{"id": 3, "data": "ccc"}, {"id": 4, "data": "ddd"}]
    assert [f.record_count for f in of(second, DataFileContent.POSITION_DELETES)] == [1]
    assert table_rows(table) == [(1, "AAA"), (3, "CCC")]


def test_partitioned_by_bucket(catalog: Catalog) -> None:
    table = create(catalog, [("bucket", "id", 4)])
    first = run_task(
        table,
        [
            changes(*[("+I", i, f"v{i}") for i in range(1, 9)]),
            changes(("-U", 1, "v1"), ("+U", 1, "w1"), ("-D", 2, "v2")),
        ],
    )
    partitions = {f.partition for f in first.data_files}
    assert len(partitions) > 1
    for f in first.delete_files:
        assert f.content == DataFileContent.POSITION_DELETES
        # a partition's position deletes point at that partition's data files only
        same = {d.file_path for d in first.data_files if d.partition == f.partition}
        assert {r["file_path"] for r in file_rows(f)} <= same
        assert f"/id_bucket={f.partition[0]}/" in f.file_path
    assert table_rows(table) == sorted([(1, "w1"), *[(i, f"v{i}") for i in range(3, 9)]])

    second = run_task(
        table, [changes(("-U", 3, "v3"), ("+U", 3, "w3"), ("-D", 4, "v4"))], task_id=1
    )
    assert {f.content for f in second.delete_files} == {DataFileContent.EQUALITY_DELETES}
    assert table_rows(table) == sorted([(1, "w1"), (3, "w3"), *[(i, f"v{i}") for i in range(5, 9)]])


def test_partitioned_update_moves_row_between_partitions(catalog: Catalog) -> None:
    """Outside upsert mode a delete is routed by its own (old) values."""
    table = create(catalog, [("identity", "data")])
    result = run_task(
        table,
        [changes(("+I", 1, "aaa"), ("+I", 2, "aaa"), ("-U", 1, "aaa"), ("+U", 1, "bbb"))],
    )
    [positions] = of(result, DataFileContent.POSITION_DELETES)
    assert positions.partition == ("aaa",)
    assert table_rows(table) == [(1, "bbb"), (2, "aaa")]
    run_task(table, [changes(("-U", 1, "bbb"), ("+U", 1, "ccc"))], task_id=1)
    assert table_rows(table) == [(1, "ccc"), (2, "aaa")]


def test_pure_equality_deletes(catalog: Catalog) -> None:
    table = create(catalog)
    run_task(table, [changes(*[("+I", i, f"v{i}") for i in range(1, 6)])])
    result = run_task(
        table, [changes(("-D", 1, "v1"), ("-D", 3, "v3"), ("-D", 9, "none"))], task_id=1
    )
    assert result.data_files == ()
    assert [f.content for f in result.delete_files] == [DataFileContent.EQUALITY_DELETES]
    assert result.referenced_data_files == ()
    assert table_rows(table) == [(2, "v2"), (4, "v4"), (5, "v5")]


def test_abort(catalog: Catalog) -> None:
    table = create(catalog, [("bucket", "id", 2)])
    data_dir = table.data_location
    factory = TaskWriterFactory.for_table(table, equality_fields=["id"])
    writer = factory.create(0, 0)
    writer.write(changes(*[("+I", i, f"v{i}") for i in range(20)]))
    writer.write(changes(("-U", 1, "v1"), ("+U", 1, "w1"), ("-D", 99, "gone")))
    assert files_under(data_dir)  # data and equality delete files are open
    writer.abort()
    assert files_under(data_dir) == []

    writer = factory.create(0, 1)
    writer.write(changes(("+I", 1, "a"), ("-D", 1, "a"), ("-D", 2, "b")))
    result = writer.complete()
    assert {f.content for f in result.delete_files} == {
        DataFileContent.POSITION_DELETES,
        DataFileContent.EQUALITY_DELETES,
    }
    writer.abort()  # also after complete: nothing of this task survives
    assert files_under(data_dir) == []


def test_data_column_as_key(catalog: Catalog) -> None:
    table = create(catalog)
    first = run_task(
        table,
        [changes(("+I", 1, "aaa"), ("+I", 2, "aaa"), ("+I", 3, "bbb"), ("+I", 4, "ccc"))],
        keys=["data"],
    )
    # the second "aaa" replaces the first inside the task
    assert [f.record_count for f in of(first, DataFileContent.POSITION_DELETES)] == [1]
    assert table_rows(table) == [(2, "aaa"), (3, "bbb"), (4, "ccc")]
    second = run_task(
        table,
        [changes(("-D", 0, "bbb"), ("-U", 0, "ccc"), ("+U", 5, "ccc"))],
        keys=["data"],
        task_id=1,
    )
    [equality] = of(second, DataFileContent.EQUALITY_DELETES)
    assert equality.equality_ids == (2,)
    assert table_rows(table) == [(2, "aaa"), (5, "ccc")]


def test_id_and_data_columns_as_key(catalog: Catalog) -> None:
    table = create(catalog)
    result = run_task(
        table,
        [changes(("+I", 1, "aaa"), ("+I", 2, "bbb")), changes(("-D", 1, "aaa"))],
        keys=["id", "data"],
    )
    assert len(result.data_files) == 1
    assert [f.content for f in result.delete_files] == [DataFileContent.POSITION_DELETES]
    [positions] = result.delete_files
    assert file_rows(positions) == [{"file_path": result.data_files[0].file_path, "pos": 0}]
    assert positions.referenced_data_file == result.data_files[0].file_path
    assert table_rows(table) == [(2, "bbb")]
    # only position deletes so far: pyiceberg reads it too, and agrees
    assert sorted((r["id"], r["data"]) for r in pyiceberg_rows(table.metadata_location)) == [
        (2, "bbb")
    ]
    # a key differing in one column only is another key
    second = run_task(
        table, [changes(("-D", 2, "zzz"), ("-D", 2, "bbb"))], keys=["id", "data"], task_id=1
    )
    [equality] = second.delete_files
    assert equality.equality_ids == (1, 2)
    assert table_rows(table) == []


def test_timestamp_key(catalog: Catalog) -> None:
    table = catalog.create_table(
        "db.t", schema=TS_SCHEMA, partition_spec=[("day", "ts")], identifier_fields=["ts"]
    )
    t0 = dt.datetime(2024, 3, 1, 12, 0, 0, 1)
    t1 = t0 + dt.timedelta(microseconds=1)
    t2 = t0 + dt.timedelta(days=1)

    def batch(*rows: Row) -> pa.Table:
        return changes(*rows, schema=TS_SCHEMA)

    first = run_task(
        table,
        [
            batch(("+I", 1, t0, "a"), ("+I", 2, t1, "b"), ("+I", 3, t2, "c")),
            batch(("-U", 1, t0, "a"), ("+U", 1, t0, "A")),
        ],
        keys=["ts"],
        upsert=True,
    )
    assert len({f.partition for f in first.data_files}) == 2
    run_task(
        table,
        [batch(("-D", 0, t1, "")), batch(("+U", 4, t2, "C"))],
        keys=["ts"],
        upsert=True,
        task_id=1,
    )
    assert table_rows(table, "id", "ts", "data") == [(1, t0, "A"), (4, t2, "C")]


# --- upsert --------------------------------------------------------------------------


def test_upsert_ignores_update_before_and_deletes_by_key_only(catalog: Catalog) -> None:
    table = create(catalog)
    first = run_task(table, [changes(("+I", 1, "a"), ("+I", 2, "b"))], upsert=True)
    [equality] = of(first, DataFileContent.EQUALITY_DELETES)
    assert pq.read_schema(equality.file_path).names == ["id"]
    assert pq.read_schema(equality.file_path).field("id").metadata[b"PARQUET:field_id"] == b"1"
    assert file_rows(equality) == [{"id": 1}, {"id": 2}]

    second = run_task(
        table,
        [
            changes(
                ("-U", 1, "a"), ("+U", 1, "aa"), ("+I", 2, "bb"), ("-D", 3, "c"), ("+U", 2, "bbb")
            )
        ],
        upsert=True,
        task_id=1,
    )
    # -U ignored; every key deleted once by equality; +U of 2 within the task by position
    [equality] = of(second, DataFileContent.EQUALITY_DELETES)
    assert file_rows(equality) == [{"id": 1}, {"id": 2}, {"id": 3}]
    [positions] = of(second, DataFileContent.POSITION_DELETES)
    assert file_rows(positions) == [{"file_path": second.data_files[0].file_path, "pos": 1}]
    assert table_rows(table) == [(1, "aa"), (2, "bbb")]


def test_upsert_partitioned_by_key(catalog: Catalog) -> None:
    table = create(catalog, [("bucket", "id", 3)])
    run_task(table, [changes(*[("+I", i, "x") for i in range(10)])], upsert=True)
    run_task(
        table, [changes(("+U", 4, "y"), ("-D", 5, ""), ("+I", 4, "z"))], upsert=True, task_id=1
    )
    assert table_rows(table) == sorted(
        [(i, "x") for i in range(10) if i not in (4, 5)] + [(4, "z")]
    )


def test_upsert_partition_source_must_be_a_key(catalog: Catalog) -> None:
    table = create(catalog, [("identity", "data")])
    factory = TaskWriterFactory.for_table(table, equality_fields=["id"], upsert=True)
    with pytest.raises(InvalidOptionError, match="partition source column 'data'"):
        factory.create(0, 0)


# --- files and options -----------------------------------------------------------------


def test_position_deletes_are_sorted_rolled_and_name_their_data_file(catalog: Catalog) -> None:
    table = create(
        catalog,
        properties={
            "write.target-file-size-bytes": "1",
            "write.delete.target-file-size-bytes": "1",
        },
    )
    n = 5000
    result = run_task(
        table,
        [
            changes(*[("+I", i, f"v{i}") for i in range(n)]),
            changes(*[("-D", i, f"v{i}") for i in range(n - 1, -1, -2)]),
        ],  # newest first
    )
    assert len(result.data_files) == n // 1000
    positions = of(result, DataFileContent.POSITION_DELETES)
    assert len(positions) > 1
    seen: list[tuple[str, int]] = []
    for f in positions:
        rows = [(r["file_path"], r["pos"]) for r in file_rows(f)]
        assert rows == sorted(rows)
        paths = {p for p, _ in rows}
        assert f.lower_bounds[DELETE_FILE_PATH_ID] == min(paths).encode()  # type: ignore[index]
        assert f.upper_bounds[DELETE_FILE_PATH_ID] == max(paths).encode()  # type: ignore[index]
        assert f.referenced_data_file == (min(paths) if len(paths) == 1 else None)
        seen.extend(rows)
    assert seen == sorted(seen) and len(seen) == n // 2
    assert set(result.referenced_data_files) == {p for p, _ in seen}
    expected = [(i, f"v{i}") for i in range(0, n, 2)]
    assert table_rows(table) == expected
    got = sorted((r["id"], r["data"]) for r in pyiceberg_rows(table.metadata_location))
    assert got == expected


def test_factory_picks_delta_writers(catalog: Catalog) -> None:
    plain = create(catalog)
    assert isinstance(
        TaskWriterFactory.for_table(plain, equality_fields=["id"]).create(0, 0),
        UnpartitionedDeltaWriter,
    )
    catalog.drop_table("db.t")
    bucketed = create(catalog, [("bucket", "id", 2)])
    assert isinstance(
        TaskWriterFactory.for_table(bucketed, equality_fields=["id"]).create(0, 0),
        PartitionedDeltaWriter,
    )


def test_row_kind_column_is_configurable_and_found_by_name(catalog: Catalog) -> None:
    table = create(catalog)
    batch = pa.table({"id": [1, 2, 1], "op": ["+I", "+I", "-D"], "data": ["a", "b", "a"]})
    batch = batch.cast(
        pa.schema([pa.field("id", pa.int64(), False), ("op", pa.string()), ("data", pa.string())])
    )
    run_task(table, [batch], row_kind_column="op")
    assert table_rows(table) == [(2, "b")]
    with pytest.raises(InvalidOptionError, match="unknown delta writer options"):
        TaskWriterFactory.for_table(
            table, equality_fields=["id"], cdc_options={"kind": "op"}
        ).create(0, 0)


# --- bad input -------------------------------------------------------------------------

GOOD = changes(("+I", 1, "a"), ("+I", 2, "b"), ("-D", 7, "x"))


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        (
            changes(("+I", 3, "c"), ("+X", 4, "d")),
            UnknownRowKindError,
            r"'\+X' in column '_row_kind' at row 1",
        ),
        (
            pa.table(
                {"_row_kind": ["+I", "-D", "+I"], "id": [3, None, 5], "data": ["c", "d", "e"]}
            ),
            NullKeyError,
            r"'id' is null at row 1",
        ),
        (GOOD.drop_columns(["_row_kind"]), MissingColumnError, "'_row_kind'"),
        (GOOD.drop_columns(["id"]), MissingColumnError, "equality field column 'id'"),
        (GOOD.append_column("extra", pa.array([1, 2, 3])), SchemaMismatchError, "'extra'"),
        (GOOD.set_column(2, "data", pa.array([1, 2, 3])), SchemaMismatchError, "'data'"),
    ],
    ids=["unknown-kind", "null-key", "no-row-kind", "no-key", "extra-column", "wrong-type"],
)
def test_bad_input_names_column_and_row_and_leaves_no_file(
    catalog: Catalog, bad: pa.Table, error: type[Exception], message: str
) -> None:
    table = create(catalog)
    writer = TaskWriterFactory.for_table(table, equality_fields=["id"]).create(0, 0)
    writer.write(GOOD)
    assert files_under(table.data_location)
    with pytest.raises(error, match=message):
        writer.write(bad)
    writer.abort()
    assert files_under(table.data_location) == []

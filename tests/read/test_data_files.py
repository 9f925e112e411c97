"""Data and delete files in each format a table may hold: ORC (pyarrow's writer, as Hive
writes it: no field ids, the partition column only in the metadata) read through the
name mapping, Avro (the layout Apache Iceberg's Avro writer uses: field ids, logical
types, maps with non-string keys as key/value records) by field id, each with deletes;
and a Parquet file pyarrow cannot decode, refused naming the file and what to do.
(Files written by Apache Iceberg Java itself: tests/interop/test_orc_avro_interop.py.)

Tests stream_sink.read.data_files: opening a data or delete file by its format.
Tests stream_sink.read.parquet_file: Parquet files.
Tests stream_sink.read.orc_file: ORC files.
Tests stream_sink.read.avro_file: Avro files."""

from __future__ import annotations

import datetime as dt
import io
import struct
import uuid
from decimal import Decimal
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.orc as orc
import pytest
from read_support import FILE_PATH_ID, POS_ID, hadoop_catalog, position_deletes, row_delta

from stream_sink.cli.main import main
from stream_sink.exceptions import UnreadableFileError, UnsupportedSchemeError
from stream_sink.table.avro_schemas import avro_schema
from stream_sink.table.manifest import DataFile, DataFileContent, FileFormat
from stream_sink.table.name_mapping import NAME_MAPPING_PROPERTY, mapping_of
from stream_sink.table.schema import Schema
from stream_sink.table.table import Table
from stream_sink.table.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

UTC = dt.timezone.utc


def _data_file(table: Table, path: str, fmt: FileFormat, rows: int, partition=()) -> DataFile:
    return DataFile(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=fmt,
        spec_id=table.spec().spec_id,
        partition=partition,
        record_count=rows,
        file_size_in_bytes=table.io.size(path),
    )


# --- ORC -----------------------------------------------------------------------------------

ORC_SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType()),
    NestedField(3, "ts", TimestampType()),
    NestedField(4, "day", DateType()),
    NestedField(5, "amount", DecimalType(9, 2)),
    NestedField(6, "point", StructType(NestedField(7, "x", DoubleType()))),
    NestedField(8, "tags", ListType(9, StringType())),
    NestedField(10, "p", StringType()),
)


def test_orc_files_of_a_migrated_table_read_by_name_mapping_with_partition_values_and_deletes(
    tmp_path: Path,
) -> None:
    catalog = hadoop_catalog(tmp_path)
    props = {NAME_MAPPING_PROPERTY: mapping_of(ORC_SCHEMA).to_json()}
    table = catalog.create_table("db.orc", ORC_SCHEMA, [("identity", "p")], properties=props)
    files = []
    for part, start in (("east", 0), ("west", 10)):
        rows = pa.table(
            {  # as Hive writes it: no field ids, the partition column only in the path
                "id": pa.array([start, start + 1, start + 2], pa.int64()),
                "name": ["a", None, "c"],
                "ts": pa.array([dt.datetime(2024, 1, 2, 3, 4, 5, 6)] * 3, pa.timestamp("ns")),
                "day": pa.array([dt.date(2024, 1, 2)] * 3, pa.date32()),
                "amount": pa.array([Decimal("1.25"), None, Decimal("-3.50")], pa.decimal128(9, 2)),
                "point": [{"x": 1.5}, None, {"x": -2.0}],
                "tags": [["t"], [], None],
            }
        )
        path = f"{table.data_location}/p={part}/part-{start}.orc"
        table.io.mkdirs(f"{table.data_location}/p={part}")
        orc.write_table(rows, path)
        files.append(_data_file(table, path, FileFormat.ORC, 3, (part,)))
    row_delta(table, files)
    row_delta(
        table, deletes=[position_deletes(table, [(files[1].file_path, 1)], partition=("west",))]
    )
    got = table.refresh().scan().to_arrow().sort_by("id")
    assert got.column("id").to_pylist() == [0, 1, 2, 10, 12]
    assert got.column("p").to_pylist() == ["east"] * 3 + ["west"] * 2
    assert got.column("ts").type == pa.timestamp("us")
    assert got.column("ts")[0].as_py() == dt.datetime(2024, 1, 2, 3, 4, 5, 6)
    assert got.column("amount").to_pylist()[:3] == [Decimal("1.25"), None, Decimal("-3.50")]
    assert got.column("point").to_pylist()[:3] == [{"x": 1.5}, None, {"x": -2.0}]
    assert got.column("tags").to_pylist()[:3] == [["t"], [], None]
    assert table.scan(row_filter="p = 'west'").count() == 2


# --- Avro ----------------------------------------------------------------------------------

AVRO_SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "s", StringType()),
    NestedField(3, "i", IntegerType()),
    NestedField(4, "f", FloatType()),
    NestedField(5, "d", DoubleType()),
    NestedField(6, "ok", BooleanType()),
    NestedField(7, "day", DateType()),
    NestedField(8, "t", TimeType()),
    NestedField(9, "ts", TimestampType()),
    NestedField(10, "tz", TimestamptzType()),
    NestedField(11, "dec", DecimalType(9, 2)),
    NestedField(12, "u", UUIDType()),
    NestedField(13, "fx", FixedType(3)),
    NestedField(14, "b", BinaryType()),
    NestedField(15, "st", StructType(NestedField(16, "a", IntegerType()))),
    NestedField(17, "l", ListType(18, LongType(), element_required=False)),
    NestedField(19, "m", MapType(20, StringType(), 21, IntegerType())),
    NestedField(22, "km", MapType(23, IntegerType(), 24, StringType())),
)
U = uuid.UUID("9c12d441-03fe-4693-9a96-a0705ddf69c1")
TS = dt.datetime(2024, 1, 2, 3, 4, 5, 6)


def _avro_record(i: int) -> dict:
    """Row ``i`` in Avro's encoding without logical types (as Java writes the values)."""
    return {
        "id": i,
        "s": f"s{i}",
        "i": i * 10,
        "f": 1.5,
        "d": 2.25,
        "ok": i % 2 == 0,
        "day": 19724,  # 2024-01-02
        "t": 3_600_000_001,
        "ts": 1_704_164_645_000_006,
        "tz": 1_704_164_645_000_006,
        "dec": struct.pack(">i", -350 + i),  # fixed[4]: unscaled big endian
        "u": U.bytes,
        "fx": b"abc",
        "b": b"\x00\x01",
        "st": {"a": i} if i else None,
        "l": [i, None],
        "m": {"k": i},
        "km": [{"key": i, "value": f"v{i}"}],
    }


def _write_avro(table: Table, name: str, schema: dict, records: list[dict]) -> str:
    """An Avro file of ``records`` (values without their logical types, which fastavro
    writes as they are) whose header holds ``schema`` with its logical types."""
    path = f"{table.data_location}/{name}"
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), records, codec="deflate")
    table.io.write_bytes(path, buf.getvalue())
    return path


def test_avro_data_and_delete_files_read_by_field_id(tmp_path: Path) -> None:
    catalog = hadoop_catalog(tmp_path)
    table = catalog.create_table("db.avro", AVRO_SCHEMA)
    schema = avro_schema(AVRO_SCHEMA.as_struct(), "table")
    path = _write_avro(table, "data.avro", schema, [_avro_record(i) for i in range(4)])
    data = _data_file(table, path, FileFormat.AVRO, 4)
    row_delta(table, [data])
    pos_schema = {
        "type": "record",
        "name": "pos",
        "fields": [
            {"name": "file_path", "type": "string", "field-id": FILE_PATH_ID},
            {"name": "pos", "type": "long", "field-id": POS_ID},
        ],
    }
    pos_path = _write_avro(table, "pos.avro", pos_schema, [{"file_path": path, "pos": 1}])
    eq_schema = {
        "type": "record",
        "name": "eq",
        "fields": [{"name": "id", "type": "long", "field-id": 1}],
    }
    eq_path = _write_avro(table, "eq.avro", eq_schema, [{"id": 3}])
    pos = _delete(table, pos_path, DataFileContent.POSITION_DELETES, None)
    eq = _delete(table, eq_path, DataFileContent.EQUALITY_DELETES, (1,))
    row_delta(table, deletes=[pos, eq])
    got = table.refresh().scan().to_arrow().sort_by("id").to_pylist(maps_as_pydicts="strict")
    assert [r["id"] for r in got] == [0, 2]
    assert got[1] == {
        "id": 2,
        "s": "s2",
        "i": 20,
        "f": 1.5,
        "d": 2.25,
        "ok": True,
        "day": dt.date(2024, 1, 2),
        "t": dt.time(1, 0, 0, 1),
        "ts": TS,
        "tz": TS.replace(tzinfo=UTC),
        "dec": Decimal("-3.48"),
        "u": U.bytes,
        "fx": b"abc",
        "b": b"\x00\x01",
        "st": {"a": 2},
        "l": [2, None],
        "m": {"k": 2},
        "km": {2: "v2"},
    }
    assert got[0]["st"] is None
    assert table.scan(columns=["id"]).count() == 2


def _delete(
    table: Table, path: str, content: DataFileContent, ids: tuple[int, ...] | None
) -> DataFile:
    return DataFile(
        content=content,
        file_path=path,
        file_format=FileFormat.AVRO,
        spec_id=0,
        partition=(),
        record_count=1,
        file_size_in_bytes=table.io.size(path),
        equality_ids=ids,
    )


# --- unreadable files ----------------------------------------------------------------------


def _null_logical_type_on_a_group(path: str) -> None:
    """Give the list group of the Parquet file at ``path`` the logical type Null, as an
    Impala-migrated table's file has it (which pyarrow refuses), in place: in the footer's
    Thrift compact encoding the union field LIST (id 3) of the group's LogicalType becomes
    UNKNOWN (id 11), the same number of bytes."""
    data = bytearray(Path(path).read_bytes())
    footer_len = struct.unpack("<I", data[-8:-4])[0]
    start = len(data) - 8 - footer_len
    footer = bytes(data[start:-8])
    at = footer.index(b"\x15\x06")  # converted_type LIST (6), just before the logical type
    hit = footer.index(b"\x3c\x00\x00", at)  # LogicalType { LIST {} }
    assert hit - at < 8, "the group's logical type is not where the writer puts it"
    data[start + hit] = 0xBC  # { UNKNOWN {} }
    Path(path).write_bytes(bytes(data))


def test_a_parquet_file_pyarrow_cannot_read_is_named_with_what_to_do(
    tmp_path: Path, capsys
) -> None:
    catalog = hadoop_catalog(tmp_path)
    schema = pa.schema([("id", pa.int64()), ("l", pa.list_(pa.int32()))])
    table = catalog.create_table("db.impala", schema)
    table.append(pa.table({"id": [1], "l": [[1, 2]]}, schema=schema))  # type: ignore[attr-defined]
    (task,) = table.scan().plan_files()  # type: ignore[attr-defined]
    path = task.data_file.file_path
    _null_logical_type_on_a_group(path)
    with pytest.raises(UnreadableFileError) as e:
        table.scan().to_arrow()  # type: ignore[attr-defined]
    text = str(e.value)
    assert f"data file {path} of table db.impala cannot be read as PARQUET" in text
    assert "Logical type Null cannot be applied to group node" in text
    assert "rewrite_data_files" in text
    capsys.readouterr()
    assert main(["read", table.location]) == 1
    err = capsys.readouterr().err
    assert err.startswith("stream-sink: UnreadableFileError: data file ") and err.count("\n") == 1


def test_a_data_file_on_s3_in_a_local_table_says_where_the_table_is_read(tmp_path: Path) -> None:
    catalog = hadoop_catalog(tmp_path)
    table = catalog.create_table("db.copied", pa.schema([("id", pa.int64())]))
    moved = DataFile(
        content=DataFileContent.DATA,
        file_path="s3://bucket/wh/db/copied/data/f.parquet",
        file_format=FileFormat.PARQUET,
        spec_id=0,
        partition=(),
        record_count=1,
        file_size_in_bytes=10,
    )
    row_delta(table, [moved])
    with pytest.raises(UnsupportedSchemeError) as e:
        table.refresh().scan().to_arrow()  # type: ignore[attr-defined]
    assert "is on s3://, but this table's files are read on file://" in str(e.value)
    assert "not supported" not in str(e.value)

"""Manifests and manifest lists: round trips, inheritance, Java/pyiceberg interop, damage."""

from __future__ import annotations

import json
import math
import os
import uuid
from dataclasses import replace
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from peers.readers import JAVA_ICEBERG, read_with_java
from pyiceberg import manifest as pym
from pyiceberg import types as pyt
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.partitioning import PartitionField as PyPartitionField
from pyiceberg.partitioning import PartitionSpec as PyPartitionSpec
from pyiceberg.schema import Schema as PySchema
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform
from pyiceberg.typedef import Record
from readers import duckdb_connection, duckdb_rows, pyiceberg_table

from stream_sink.exceptions import CorruptMetadataError, MissingFileError, ValidationError
from stream_sink.io.fileio import FileIO
from stream_sink.table import avro_schemas
from stream_sink.table.conversions import to_bytes
from stream_sink.table.manifest import (
    DataFile,
    DataFileContent,
    FieldSummary,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestListWriter,
    ManifestWriter,
    read_manifest,
    read_manifest_list,
)
from stream_sink.table.partitioning import build_partition_spec
from stream_sink.table.schema import Schema
from stream_sink.table.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
    type_from_json,
)

JAVA_DIR = Path(__file__).parent / "data" / "java_manifests"
IO = FileIO()
SNAP = 4242

SCHEMA = Schema(
    NestedField(1, "id", LongType(), True),
    NestedField(2, "name", StringType()),
    NestedField(3, "ts", TimestamptzType()),
    NestedField(4, "amt", DecimalType(9, 2)),
)

# One partition field of every type a transform can produce (no named Avro type twice).
WIDE_PARTITION = StructType(
    NestedField(1000, "ts_day", DateType()),
    NestedField(1001, "amt", DecimalType(9, 2)),
    NestedField(1002, "u", UUIDType()),
    NestedField(1003, "fx", FixedType(4)),
    NestedField(1004, "t", TimeType()),
    NestedField(1005, "ts", TimestamptzType()),
    NestedField(1006, "ntz", TimestampType()),
    NestedField(1007, "x", DoubleType()),
    NestedField(1008, "flag", BooleanType()),
    NestedField(1009, "b", BinaryType()),
    NestedField(1010, "name", StringType()),
    NestedField(1011, "big", DecimalType(30, 4)),
    NestedField(1012, "id_bucket", IntegerType()),
    NestedField(1013, "n", LongType()),
    NestedField(1014, "a-b c", StringType()),
)
WIDE_SPEC_JSON = [
    {"name": f.name, "transform": "identity", "source-id": 1, "field-id": f.field_id}
    for f in WIDE_PARTITION.fields
]
UUID_BYTES = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7").bytes
WIDE_VALUES = (
    19724,
    Decimal("-12.34"),
    UUID_BYTES,
    b"abcd",
    3_600_000_000,
    1_704_164_645_000_000,
    -5,
    1.5,
    True,
    b"\x00\xff",
    "héllo",
    Decimal("123456789012345678.1234"),
    3,
    2**40,
    "x",
)


def _data_file(path: str, partition: tuple[Any, ...], **kw: Any) -> DataFile:
    args: dict[str, Any] = {
        "content": DataFileContent.DATA,
        "file_path": path,
        "file_format": FileFormat.PARQUET,
        "spec_id": 0,
        "partition": partition,
        "record_count": 10,
        "file_size_in_bytes": 1234,
        "column_sizes": {1: 50, 2: 60},
        "value_counts": {1: 10, 2: 10},
        "null_value_counts": {1: 0, 2: 3},
        "nan_value_counts": {},
        "lower_bounds": {1: to_bytes(LongType(), 1), 2: b"a"},
        "upper_bounds": {1: to_bytes(LongType(), 99), 2: b"z"},
        "split_offsets": (4,),
        "sort_order_id": 0,
    }
    args.update(kw)
    return DataFile(**args)


def _writer(tmp_path: Path, name: str = "m.avro", **kw: Any) -> ManifestWriter:
    args: dict[str, Any] = {
        "spec_id": 0,
        "partition_type": WIDE_PARTITION,
        "schema": SCHEMA,
        "snapshot_id": SNAP,
        "partition_spec_json": WIDE_SPEC_JSON,
    }
    args.update(kw)
    return ManifestWriter(IO, str(tmp_path / name), **args)


def _list(tmp_path: Path, manifests: list[ManifestFile], seq: int, **kw: Any) -> list[ManifestFile]:
    location = str(tmp_path / f"snap-{seq}.avro")
    writer = ManifestListWriter(IO, location, kw.pop("snapshot_id", SNAP), None, seq, **kw)
    writer.add_manifests(manifests)
    writer.close()
    return read_manifest_list(IO, location)


# --- round trips ---------------------------------------------------------------------


def test_data_manifest_round_trip(tmp_path: Path) -> None:
    full = _data_file(f"{tmp_path}/d1.parquet", WIDE_VALUES, key_metadata=b"k")
    empty = _data_file(
        f"{tmp_path}/d2.parquet",
        (None,) * len(WIDE_VALUES),
        column_sizes=None,
        value_counts=None,
        null_value_counts=None,
        nan_value_counts=None,
        lower_bounds=None,
        upper_bounds=None,
        split_offsets=None,
        sort_order_id=None,
    )
    writer = _writer(tmp_path)
    writer.add(full)
    writer.add(empty)
    manifest = writer.close()
    assert manifest.manifest_length == os.path.getsize(manifest.manifest_path)
    assert (manifest.added_files_count, manifest.added_rows_count) == (2, 20)
    assert manifest.sequence_number is None and manifest.min_sequence_number is None

    [listed] = _list(tmp_path, [manifest], seq=4)
    assert listed == replace(manifest, sequence_number=4, min_sequence_number=4)
    entries = read_manifest(IO, listed, WIDE_PARTITION)
    assert [e.data_file for e in entries] == [full, empty]
    assert all(
        (e.snapshot_id, e.sequence_number, e.file_sequence_number) == (SNAP, 4, 4) for e in entries
    )
    assert read_manifest(IO, listed) == entries  # partition order from the file itself


def test_delete_manifest_round_trip(tmp_path: Path) -> None:
    eq = _data_file(
        f"{tmp_path}/eq.parquet",
        WIDE_VALUES,
        content=DataFileContent.EQUALITY_DELETES,
        equality_ids=(1, 2),
        sort_order_id=None,
    )
    pos = _data_file(
        f"{tmp_path}/pos.parquet",
        WIDE_VALUES,
        content=DataFileContent.POSITION_DELETES,
        referenced_data_file=f"{tmp_path}/d1.parquet",
        sort_order_id=None,
    )
    writer = _writer(tmp_path, content=ManifestContent.DELETES)
    writer.add(eq)
    writer.add(pos)
    with pytest.raises(ValidationError, match="data file"):
        writer.add(_data_file(f"{tmp_path}/d.parquet", WIDE_VALUES))
    manifest = writer.close()
    assert manifest.content == ManifestContent.DELETES
    [listed] = _list(tmp_path, [manifest], seq=2)
    files = [e.data_file for e in read_manifest(IO, listed, WIDE_PARTITION)]
    assert files == [eq, pos]
    assert all(f.is_delete for f in files)
    assert _header(manifest.manifest_path)["content"] == "deletes"


def test_data_manifest_refuses_delete_files(tmp_path: Path) -> None:
    writer = _writer(tmp_path)
    with pytest.raises(ValidationError, match="delete file"):
        writer.add(_data_file("x", WIDE_VALUES, content=DataFileContent.POSITION_DELETES))
    with pytest.raises(ValidationError, match="expects 15 values"):
        writer.add(_data_file("y", (1,)))


def test_close_is_idempotent_and_final(tmp_path: Path) -> None:
    writer = _writer(tmp_path)
    writer.add(_data_file("a", WIDE_VALUES))
    first = writer.close()
    assert writer.close() is first
    with pytest.raises(ValidationError, match="closed"):
        writer.add(_data_file("b", WIDE_VALUES))


# --- sequence numbers and snapshot ids ---------------------------------------------


def test_sequence_number_inheritance(tmp_path: Path) -> None:
    part = StructType(NestedField(1000, "p", IntegerType()))
    spec = [{"name": "p", "transform": "identity", "source-id": 1, "field-id": 1000}]
    old = lambda name, seq, snap: ManifestEntry(  # noqa: E731
        ManifestEntryStatus.ADDED, snap, seq, seq, _data_file(name, (1,))
    )
    writer = _writer(tmp_path, partition_type=part, partition_spec_json=spec)
    writer.add(_data_file("new", (1,)))
    writer.add(_data_file("explicit", (1,)), sequence_number=3)
    writer.existing(old("kept", 2, 100))
    writer.delete(old("gone", 1, 101))
    manifest = writer.close()
    assert manifest.min_sequence_number == 2  # live entries only; unassigned ones ignored
    assert (manifest.existing_files_count, manifest.deleted_files_count) == (1, 1)

    [listed] = _list(tmp_path, [manifest], seq=9)
    assert (listed.sequence_number, listed.min_sequence_number) == (9, 2)
    got = {
        e.data_file.file_path: (e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number)
        for e in read_manifest(IO, listed, part)
    }
    assert got == {
        "new": (ManifestEntryStatus.ADDED, SNAP, 9, 9),
        "explicit": (ManifestEntryStatus.ADDED, SNAP, 3, 9),
        "kept": (ManifestEntryStatus.EXISTING, 100, 2, 2),
        "gone": (ManifestEntryStatus.DELETED, SNAP, 1, 1),
    }


def test_manifest_without_snapshot_id_inherits_the_lists(tmp_path: Path) -> None:
    writer = _writer(tmp_path, snapshot_id=None)
    writer.add(_data_file("a", WIDE_VALUES))
    manifest = writer.close()
    assert manifest.added_snapshot_id is None
    [listed] = _list(tmp_path, [manifest], seq=1, snapshot_id=77)
    assert listed.added_snapshot_id == 77
    [entry] = read_manifest(IO, listed)
    assert (entry.snapshot_id, entry.sequence_number) == (77, 1)
    raw = _first_record(manifest.manifest_path)
    assert raw["snapshot_id"] is None and raw["sequence_number"] is None


def test_list_refuses_unassigned_manifests_of_other_snapshots(tmp_path: Path) -> None:
    writer = _writer(tmp_path, snapshot_id=1)
    writer.add(_data_file("a", WIDE_VALUES))
    manifest = writer.close()
    lw = ManifestListWriter(IO, str(tmp_path / "l.avro"), 2, 1, 5)
    with pytest.raises(ValidationError, match="no sequence number"):
        lw.add_manifests([manifest])
    assigned = replace(manifest, sequence_number=3, min_sequence_number=-1)
    with pytest.raises(ValidationError):
        lw.add_manifests([assigned])
    [kept] = lw.add_manifests([replace(manifest, sequence_number=3, min_sequence_number=3)])
    assert (kept.sequence_number, kept.added_snapshot_id) == (3, 1)


def test_v2_refuses_existing_entries_without_sequence_numbers(tmp_path: Path) -> None:
    writer = _writer(tmp_path)
    entry = ManifestEntry(ManifestEntryStatus.ADDED, 1, None, None, _data_file("a", WIDE_VALUES))
    with pytest.raises(ValidationError, match="EXISTING entry for a needs a sequence number"):
        writer.existing(entry)


# --- headers and the Avro layout ------------------------------------------------------


def _header(path: str) -> dict[str, str]:
    with open(path, "rb") as f:
        return dict(fastavro.reader(f).metadata)


def _first_record(path: str) -> Any:
    with open(path, "rb") as f:
        return next(iter(fastavro.reader(f)))


def test_manifest_header_metadata(tmp_path: Path) -> None:
    writer = _writer(tmp_path)
    writer.add(_data_file("a", WIDE_VALUES))
    header = _header(writer.close().manifest_path)
    assert Schema.from_json(json.loads(header["schema"])) == SCHEMA
    assert header["schema-id"] == "0"
    assert json.loads(header["partition-spec"]) == WIDE_SPEC_JSON
    assert (header["partition-spec-id"], header["format-version"]) == ("0", "2")
    assert header["content"] == "data"
    assert header["avro.codec"] == "deflate"
    iceberg = json.loads(header["iceberg.schema"])
    assert [f["id"] for f in iceberg["fields"]] == [0, 1, 3, 4, 2]


def test_header_partition_spec_from_a_partition_spec(tmp_path: Path) -> None:
    spec = build_partition_spec(SCHEMA, [("day", "ts"), ("bucket", "id", 16), ("identity", "amt")])
    writer = ManifestWriter.for_spec(IO, str(tmp_path / "m.avro"), spec, SCHEMA, SNAP)
    writer.add(_data_file("a", (19724, 3, Decimal("1.00"))))
    manifest = writer.close()
    header = _header(manifest.manifest_path)
    assert json.loads(header["partition-spec"]) == spec.fields_to_json()
    [entry] = read_manifest(IO, replace(manifest, sequence_number=1), spec.partition_type(SCHEMA))
    assert entry.data_file.partition == (19724, 3, Decimal("1.00"))


def test_partition_record_layout(tmp_path: Path) -> None:
    writer = _writer(tmp_path)
    writer.add(_data_file("a", WIDE_VALUES))
    schema = json.loads(_header(writer.close().manifest_path)["avro.schema"])
    data_file = next(f for f in schema["fields"] if f["field-id"] == 2)["type"]
    assert data_file["name"] == "r2"
    partition = next(f for f in data_file["fields"] if f["field-id"] == 102)["type"]
    assert partition["name"] == "r102"
    by_id = {f["field-id"]: f for f in partition["fields"]}
    assert by_id[1000]["type"] == ["null", {"type": "int", "logicalType": "date"}]
    assert by_id[1001]["type"][1] == {
        "type": "fixed",
        "name": "decimal_9_2",
        "size": 4,
        "logicalType": "decimal",
        "precision": 9,
        "scale": 2,
    }
    assert by_id[1002]["type"][1]["logicalType"] == "uuid"
    assert by_id[1005]["type"][1]["adjust-to-utc"] is True
    assert by_id[1006]["type"][1]["adjust-to-utc"] is False
    assert by_id[1014]["name"] == "a_x2Db_x20c"
    assert by_id[1014]["iceberg-field-name"] == "a-b c"
    assert all(f["default"] is None for f in partition["fields"])
    sizes = next(f for f in data_file["fields"] if f["field-id"] == 108)["type"][1]
    assert sizes["logicalType"] == "map"
    assert sizes["items"]["name"] == "k117_v118"
    assert [f["field-id"] for f in sizes["items"]["fields"]] == [117, 118]


def test_repeated_named_types_are_referenced_by_name(tmp_path: Path) -> None:
    part = StructType(
        NestedField(1000, "a", DecimalType(9, 2)), NestedField(1001, "b", DecimalType(9, 2))
    )
    writer = _writer(tmp_path, partition_type=part, partition_spec_json=[])
    writer.add(_data_file("f", (Decimal("1.10"), Decimal("-2.00"))))
    manifest = writer.close()
    text = _header(manifest.manifest_path)["avro.schema"]
    assert text.count('"name": "decimal_9_2"') == 1
    [entry] = read_manifest(IO, replace(manifest, sequence_number=1), part)
    assert entry.data_file.partition == (Decimal("1.10"), Decimal("-2.00"))


@pytest.mark.parametrize("table", ["v1", "v2"])
def test_avro_schemas_match_what_java_writes(table: str) -> None:
    version = int(table[1])
    for path in sorted((JAVA_DIR / table).iterdir()):
        header = _header(str(path))
        java = json.loads(header["avro.schema"])
        if path.name.startswith("snap-"):
            ours = avro_schemas.avro_schema(
                avro_schemas.manifest_file_type(version), "manifest_file"
            )
        else:
            fields = json.loads(header["iceberg.schema"])["fields"]
            data_file = next(f for f in fields if f["id"] == 2)["type"]
            partition = next(f for f in data_file["fields"] if f["id"] == 102)["type"]
            partition_type = type_from_json(partition)
            assert isinstance(partition_type, StructType)
            entry = avro_schemas.manifest_entry_type(partition_type, version)
            ours = avro_schemas.avro_schema(entry, "manifest_entry")
        assert ours == java, path.name


# --- reading what Java wrote ---------------------------------------------------------------


def _java_manifests(table: str) -> list[ManifestFile]:
    """Every manifest of the newest Java snapshot, paths pointed at the test copies."""
    lists = [str(p) for p in (JAVA_DIR / table).glob("snap-*.avro")]
    newest = max(lists, key=lambda p: len(read_manifest_list(IO, p)))
    out = []
    for m in read_manifest_list(IO, str(newest)):
        out.append(replace(m, manifest_path=str(JAVA_DIR / table / Path(m.manifest_path).name)))
    return out


def test_read_java_v2_data_and_position_delete_manifests() -> None:
    manifests = _java_manifests("v2")
    by_content = {m.content: m for m in manifests}
    data, deletes = by_content[ManifestContent.DATA], by_content[ManifestContent.DELETES]
    assert (data.sequence_number, deletes.sequence_number) == (1, 2)
    files = {e.data_file.record_count: e for e in read_manifest(IO, data)}
    full = files[2].data_file
    assert full.partition == (
        19724,
        Decimal("-12.34"),
        "al",
        19724,
        Decimal("123456789012345678.1234"),
        b"\x01\x02",
        1_704_164_645_000_000,
        1.5,
    )
    assert full.lower_bounds is not None and full.lower_bounds[2] == b"alpha"
    assert (files[2].sequence_number, files[2].file_sequence_number) == (1, 1)
    nan_row = files[1].data_file.partition
    assert nan_row[:7] == (None,) * 7 and math.isnan(nan_row[7])
    [pos] = read_manifest(IO, deletes)
    assert pos.data_file.content == DataFileContent.POSITION_DELETES
    assert pos.sequence_number == 2 and pos.snapshot_id == deletes.added_snapshot_id
    summaries = data.partitions
    assert summaries is not None and summaries[7] == FieldSummary(
        False, True, to_bytes(DoubleType(), 1.5), to_bytes(DoubleType(), 1.5)
    )


def test_read_java_v1_manifests() -> None:
    manifests = _java_manifests("v1")
    assert len(manifests) == 2
    assert all(
        (m.content, m.sequence_number, m.min_sequence_number) == (ManifestContent.DATA, 0, 0)
        for m in manifests
    )
    entries = [e for m in manifests for e in read_manifest(IO, m)]
    assert sorted(e.data_file.partition for e in entries) == [("a",), ("b",), ("c",)]
    assert all((e.sequence_number, e.file_sequence_number) == (0, 0) for e in entries)
    assert all(e.data_file.content == DataFileContent.DATA for e in entries)


def test_rewriting_java_entries_keeps_them_intact(tmp_path: Path) -> None:
    data = next(m for m in _java_manifests("v2") if m.content == ManifestContent.DATA)
    fields = json.loads(_header(data.manifest_path)["iceberg.schema"])["fields"]
    df_type = next(f for f in fields if f["id"] == 2)["type"]
    part = type_from_json(next(f for f in df_type["fields"] if f["id"] == 102)["type"])
    assert isinstance(part, StructType)
    entries = read_manifest(IO, data, part)
    writer = _writer(tmp_path, partition_type=part, partition_spec_json=[])
    for e in entries:
        writer.existing(e)
    [listed] = _list(tmp_path, [writer.close()], seq=5)
    expected = [replace(e, status=ManifestEntryStatus.EXISTING) for e in entries]
    assert repr(read_manifest(IO, listed, part)) == repr(expected)  # repr: NaN != NaN


# --- v1 ---------------------------------------------------------------------------------


def test_v1_round_trip(tmp_path: Path) -> None:
    writer = _writer(tmp_path, format_version=1)
    writer.add(_data_file("a", WIDE_VALUES))
    manifest = writer.close()
    raw = _first_record(manifest.manifest_path)
    assert raw["data_file"]["block_size_in_bytes"] == 64 * 1024 * 1024
    assert "sequence_number" not in raw and "content" not in raw["data_file"]
    [listed] = _list(tmp_path, [manifest], seq=3, format_version=1)
    assert (listed.sequence_number, listed.min_sequence_number) == (0, 0)
    header = _header(str(tmp_path / "snap-3.avro"))
    assert "sequence-number" not in header and header["format-version"] == "1"
    [entry] = read_manifest(IO, listed)
    assert (entry.snapshot_id, entry.sequence_number, entry.file_sequence_number) == (SNAP, 0, 0)
    assert entry.data_file == _data_file("a", WIDE_VALUES)


def test_v1_refuses_delete_manifests(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="v1"):
        _writer(tmp_path, format_version=1, content=ManifestContent.DELETES)
    deletes = replace(_dummy_manifest(), content=ManifestContent.DELETES)
    with pytest.raises(ValidationError, match="v1"):
        ManifestListWriter(IO, str(tmp_path / "l.avro"), SNAP, None, 1, 1).add_manifests([deletes])


def _dummy_manifest() -> ManifestFile:
    return ManifestFile("m.avro", 10, 0, ManifestContent.DATA, 1, 1, SNAP, 1, 0, 0, 1, 0, 0)


def test_manifest_list_header(tmp_path: Path) -> None:
    location = str(tmp_path / "l.avro")
    writer = ManifestListWriter(IO, location, 11, None, 7)
    writer.add_manifests([_dummy_manifest()])
    assert writer.close() == os.path.getsize(location)
    header = _header(location)
    assert header["snapshot-id"] == "11"
    assert header["parent-snapshot-id"] == "null"
    assert header["sequence-number"] == "7"
    assert header["format-version"] == "2"
    writer = ManifestListWriter(IO, location, 12, 11, 8)
    writer.close()
    assert _header(location)["parent-snapshot-id"] == "11"
    assert read_manifest_list(IO, location) == []


# --- partition summaries ---------------------------------------------------------------


def test_partition_summaries(tmp_path: Path) -> None:
    part = StructType(
        NestedField(1000, "i", IntegerType()),
        NestedField(1001, "x", DoubleType()),
        NestedField(1002, "s", StringType()),
        NestedField(1003, "never", LongType()),
    )
    writer = _writer(tmp_path, partition_type=part, partition_spec_json=[])
    for i, values in enumerate(
        [(None, 1.5, "b", None), (2, float("nan"), "a", None), (5, -1.0, "c", None)]
    ):
        writer.add(_data_file(f"f{i}", values))
    manifest = writer.close()
    expected = (
        FieldSummary(True, False, to_bytes(IntegerType(), 2), to_bytes(IntegerType(), 5)),
        FieldSummary(False, True, to_bytes(DoubleType(), -1.0), to_bytes(DoubleType(), 1.5)),
        FieldSummary(False, False, b"a", b"c"),
        FieldSummary(True, False, None, None),
    )
    assert manifest.partitions == expected
    [listed] = _list(tmp_path, [manifest], seq=1)
    assert listed.partitions == expected


def test_unpartitioned_manifest(tmp_path: Path) -> None:
    writer = _writer(tmp_path, partition_type=StructType(), partition_spec_json=None)
    writer.add(_data_file("a", ()))
    manifest = writer.close()
    assert manifest.partitions == ()
    assert _header(manifest.manifest_path)["partition-spec"] == "[]"
    [listed] = _list(tmp_path, [manifest], seq=1)
    assert listed.partitions == ()
    assert read_manifest(IO, listed)[0].data_file.partition == ()


# --- pyiceberg interop ---------------------------------------------------------------------


def test_pyiceberg_reads_our_manifests(tmp_path: Path) -> None:
    writer = _writer(tmp_path)
    ours = _data_file(f"{tmp_path}/d.parquet", WIDE_VALUES)
    writer.add(ours)
    data = writer.close()
    deletes_writer = _writer(tmp_path, "d.avro", content=ManifestContent.DELETES)
    eq = _data_file("eq", WIDE_VALUES, content=DataFileContent.EQUALITY_DELETES, equality_ids=(1,))
    deletes_writer.add(eq, sequence_number=1)
    deletes = deletes_writer.close()
    location = str(tmp_path / "list.avro")
    lw = ManifestListWriter(IO, location, SNAP, 1, 6)
    lw.add_manifests([data, deletes])
    lw.close()

    pio = PyArrowFileIO()
    listed = list(pym.read_manifest_list(pio.new_input(location)))
    assert [(m.content, m.sequence_number, m.min_sequence_number) for m in listed] == [
        (pym.ManifestContent.DATA, 6, 6),
        (pym.ManifestContent.DELETES, 6, 1),
    ]
    [entry] = listed[0].fetch_manifest_entry(pio, discard_deleted=False)
    assert (entry.snapshot_id, entry.sequence_number, entry.file_sequence_number) == (SNAP, 6, 6)
    f = entry.data_file
    assert f.file_path == ours.file_path and f.record_count == 10
    expected = list(WIDE_VALUES)
    expected[2] = uuid.UUID(bytes=UUID_BYTES)
    assert [f.partition[i] for i in range(len(expected))] == expected
    assert (f.lower_bounds, f.upper_bounds, f.split_offsets) == (
        ours.lower_bounds,
        ours.upper_bounds,
        [4],
    )
    [entry] = listed[1].fetch_manifest_entry(pio, discard_deleted=False)
    assert entry.data_file.content == pym.DataFileContent.EQUALITY_DELETES
    assert entry.data_file.equality_ids == [1]
    assert (entry.sequence_number, entry.file_sequence_number) == (1, 6)


def _pyiceberg_manifest(tmp_path: Path, version: Literal[1, 2]) -> str:
    schema = PySchema(
        pyt.NestedField(1, "id", pyt.LongType(), required=True),
        pyt.NestedField(3, "ts", pyt.TimestamptzType(), required=False),
        pyt.NestedField(4, "amt", pyt.DecimalType(9, 2), required=False),
    )
    spec = PyPartitionSpec(
        PyPartitionField(3, 1000, DayTransform(), "ts_day"),
        PyPartitionField(4, 1001, IdentityTransform(), "amt"),
        PyPartitionField(1, 1002, BucketTransform(8), "id_bucket"),
        spec_id=0,
    )
    pio = PyArrowFileIO()
    data_file = pym.DataFile.from_args(
        content=pym.DataFileContent.DATA,
        file_path="/data/x.parquet",
        file_format=pym.FileFormat.PARQUET,
        partition=Record(19000, Decimal("1.25"), 5),
        record_count=3,
        file_size_in_bytes=100,
        value_counts={1: 3},
        null_value_counts={1: 0},
        lower_bounds={1: b"\x01" + b"\x00" * 7},
        upper_bounds={1: b"\x03" + b"\x00" * 7},
        split_offsets=[4],
    )
    data_file.spec_id = 0
    path = str(tmp_path / f"py-m{version}.avro")
    with pym.write_manifest(version, spec, schema, pio.new_output(path), 55, "deflate") as w:
        w.add(
            pym.ManifestEntry.from_args(
                status=pym.ManifestEntryStatus.ADDED, snapshot_id=55, data_file=data_file
            )
        )
    list_path = str(tmp_path / f"py-l{version}.avro")
    seq = 3 if version == 2 else None
    with pym.write_manifest_list(
        version, pio.new_output(list_path), 55, None, seq, "deflate"
    ) as lw:
        lw.add_manifests([w.to_manifest_file()])
    return list_path


@pytest.mark.parametrize("version", [1, 2])
def test_we_read_pyiceberg_manifests(tmp_path: Path, version: Literal[1, 2]) -> None:
    [manifest] = read_manifest_list(IO, _pyiceberg_manifest(tmp_path, version))
    seq = 3 if version == 2 else 0
    assert (manifest.sequence_number, manifest.added_snapshot_id) == (seq, 55)
    [entry] = read_manifest(IO, manifest)
    assert (entry.snapshot_id, entry.sequence_number, entry.file_sequence_number) == (55, seq, seq)
    f = entry.data_file
    assert f.partition == (19000, Decimal("1.25"), 5)
    assert (f.file_path, f.record_count, f.value_counts) == ("/data/x.parquet", 3, {1: 3})
    assert f.content == DataFileContent.DATA and f.file_format == FileFormat.PARQUET


# --- damage ---------------------------------------------------------------------------------


@pytest.fixture()
def written(tmp_path: Path) -> tuple[ManifestFile, str]:
    writer = _writer(tmp_path)
    for i in range(50):
        writer.add(_data_file(f"{tmp_path}/f{i}.parquet", WIDE_VALUES))
    [listed] = _list(tmp_path, [writer.close()], seq=1)
    return listed, str(tmp_path / "snap-1.avro")


@pytest.mark.parametrize("cut", [0.5, 0.9, 20, 3])
def test_truncated_files_are_corruption(written: tuple[ManifestFile, str], cut: float) -> None:
    manifest, list_path = written
    for path in (manifest.manifest_path, list_path):
        data = Path(path).read_bytes()
        keep = int(len(data) * cut) if cut < 1 else int(cut)
        Path(path).write_bytes(data[:keep])
    with pytest.raises(CorruptMetadataError, match=manifest.manifest_path):
        read_manifest(IO, manifest)
    with pytest.raises(CorruptMetadataError, match=list_path):
        read_manifest_list(IO, list_path)


def test_garbage_and_empty_files_are_corruption(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.avro"
    garbage.write_bytes(b"not avro at all" * 10)
    empty = tmp_path / "empty.avro"
    empty.write_bytes(b"")
    for path in (garbage, empty):
        with pytest.raises(CorruptMetadataError, match=str(path)):
            read_manifest_list(IO, str(path))
        with pytest.raises(CorruptMetadataError, match=str(path)):
            read_manifest(IO, replace(_dummy_manifest(), manifest_path=str(path)))


def test_flipped_bytes_in_a_block_are_corruption(written: tuple[ManifestFile, str]) -> None:
    manifest, _ = written
    data = bytearray(Path(manifest.manifest_path).read_bytes())
    for i in range(len(data) - 200, len(data) - 40):
        data[i] ^= 0x5A
    Path(manifest.manifest_path).write_bytes(bytes(data))
    with pytest.raises(CorruptMetadataError, match=manifest.manifest_path):
        read_manifest(IO, manifest)


def test_missing_files(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.avro")
    with pytest.raises(MissingFileError, match=r"nope\.avro"):
        read_manifest_list(IO, missing)
    with pytest.raises(MissingFileError, match=r"nope\.avro"):
        read_manifest(IO, replace(_dummy_manifest(), manifest_path=missing))


def test_manifest_that_is_not_a_manifest(tmp_path: Path) -> None:
    # a valid Avro file of the wrong shape: a manifest list read as a manifest
    location = str(tmp_path / "l.avro")
    writer = ManifestListWriter(IO, location, 1, None, 1)
    writer.add_manifests([_dummy_manifest()])
    writer.close()
    with pytest.raises(CorruptMetadataError, match=location):
        read_manifest(IO, replace(_dummy_manifest(), manifest_path=location))


# --- whole tables made of our manifests, read by DuckDB, pyiceberg and Java -------------

TABLE_SCHEMA = Schema(
    NestedField(1, "id", LongType(), True),
    NestedField(2, "cat", StringType()),
    NestedField(3, "amt", DecimalType(9, 2)),
    NestedField(4, "d", DateType()),
)
TABLE_PARTITION = StructType(
    NestedField(1000, "cat", StringType()),
    NestedField(1001, "amt", DecimalType(9, 2)),
    NestedField(1002, "d", DateType()),
)
TABLE_SPEC = [
    {"name": f.name, "transform": "identity", "source-id": f.field_id - 998, "field-id": f.field_id}
    for f in TABLE_PARTITION.fields
]
DAY = 19724  # 2024-01-02


def _parquet(path: Path, rows: list[dict[str, Any]], fields: list[tuple[str, int, Any]]) -> int:
    schema = pa.schema(
        [pa.field(n, t, metadata={"PARQUET:field_id": str(i)}) for n, i, t in fields]
    )
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path.stat().st_size


def _table_of_our_manifests(root: Path) -> tuple[str, int]:
    """A v2 table: snapshot 1 adds two files, snapshot 2 adds an equality and a position delete.

    Returns its metadata location and the first snapshot's id. Live rows: ids 1 and 3.
    """
    (root / "data").mkdir(parents=True)
    loc, meta_dir = str(root), root / "metadata"
    cols = [
        ("id", 1, pa.int64()),
        ("cat", 2, pa.string()),
        ("amt", 3, pa.decimal128(9, 2)),
        ("d", 4, pa.date32()),
    ]
    day = date(2024, 1, 2)
    rows_a = [{"id": i, "cat": "x", "amt": Decimal("1.50"), "d": day} for i in (1, 2, 3)]
    rows_b = [{"id": 4, "cat": "y", "amt": Decimal("-2.00"), "d": day}]
    part_a, part_b = ("x", Decimal("1.50"), DAY), ("y", Decimal("-2.00"), DAY)
    a, b = root / "data" / "a.parquet", root / "data" / "b.parquet"
    lo = lambda v: to_bytes(LongType(), v)  # noqa: E731
    data = [
        _data_file(
            str(a),
            part_a,
            record_count=3,
            file_size_in_bytes=_parquet(a, rows_a, cols),
            lower_bounds={1: lo(1)},
            upper_bounds={1: lo(3)},
        ),
        _data_file(
            str(b),
            part_b,
            record_count=1,
            file_size_in_bytes=_parquet(b, rows_b, cols),
            lower_bounds={1: lo(4)},
            upper_bounds={1: lo(4)},
        ),
    ]
    eq_path, pos_path = root / "data" / "eq.parquet", root / "data" / "pos.parquet"
    eq = _data_file(
        str(eq_path),
        part_a,
        content=DataFileContent.EQUALITY_DELETES,
        equality_ids=(1,),
        record_count=1,
        file_size_in_bytes=_parquet(eq_path, [{"id": 2}], cols[:1]),
        lower_bounds={1: lo(2)},
        upper_bounds={1: lo(2)},
        sort_order_id=None,
    )
    pos_rows = [{"file_path": str(b), "pos": 0}]
    pos_cols = [("file_path", 2147483546, pa.string()), ("pos", 2147483545, pa.int64())]
    pos = _data_file(
        str(pos_path),
        part_b,
        content=DataFileContent.POSITION_DELETES,
        record_count=1,
        file_size_in_bytes=_parquet(pos_path, pos_rows, pos_cols),
        referenced_data_file=str(b),
        sort_order_id=None,
    )
    s1, s2 = 1111, 2222
    common = {
        "partition_type": TABLE_PARTITION,
        "schema": TABLE_SCHEMA,
        "partition_spec_json": TABLE_SPEC,
    }
    w1 = ManifestWriter(IO, f"{meta_dir}/m1.avro", 0, snapshot_id=s1, **common)
    for f in data:
        w1.add(f)
    l1 = ManifestListWriter(IO, f"{meta_dir}/snap-{s1}.avro", s1, None, 1)
    [m1] = l1.add_manifests([w1.close()])
    l1.close()
    w2 = ManifestWriter(
        IO, f"{meta_dir}/m2.avro", 0, snapshot_id=s2, content=ManifestContent.DELETES, **common
    )
    w2.add(eq)
    w2.add(pos)
    l2 = ManifestListWriter(IO, f"{meta_dir}/snap-{s2}.avro", s2, s1, 2)
    l2.add_manifests([m1, w2.close()])
    l2.close()
    snapshots = [
        {
            "snapshot-id": s,
            "sequence-number": i + 1,
            "timestamp-ms": 1_700_000_000_000 + i,
            "summary": {"operation": op},
            "manifest-list": f"{meta_dir}/snap-{s}.avro",
            "schema-id": 0,
        }
        | ({"parent-snapshot-id": s1} if s == s2 else {})
        for i, (s, op) in enumerate([(s1, "append"), (s2, "overwrite")])
    ]
    metadata = {
        "format-version": 2,
        "table-uuid": str(uuid.uuid4()),
        "location": loc,
        "last-sequence-number": 2,
        "last-updated-ms": 1_700_000_000_001,
        "last-column-id": 4,
        "current-schema-id": 0,
        "schemas": [TABLE_SCHEMA.to_json()],
        "default-spec-id": 0,
        "partition-specs": [{"spec-id": 0, "fields": TABLE_SPEC}],
        "last-partition-id": 1002,
        "default-sort-order-id": 0,
        "sort-orders": [{"order-id": 0, "fields": []}],
        "properties": {},
        "current-snapshot-id": s2,
        "refs": {"main": {"snapshot-id": s2, "type": "branch"}},
        "snapshots": snapshots,
        "snapshot-log": [],
        "metadata-log": [],
    }
    (meta_dir / "v1.metadata.json").write_text(json.dumps(metadata))
    (meta_dir / "version-hint.text").write_text("1")
    return str(meta_dir / "v1.metadata.json"), s1


def test_duckdb_reads_a_table_made_of_our_manifests(tmp_path: Path) -> None:
    location, _ = _table_of_our_manifests(tmp_path / "t")
    rows = sorted(duckdb_rows(location), key=lambda r: r["id"])
    assert rows == [
        {"id": 1, "cat": "x", "amt": Decimal("1.50"), "d": date(2024, 1, 2)},
        {"id": 3, "cat": "x", "amt": Decimal("1.50"), "d": date(2024, 1, 2)},
    ]
    con = duckdb_connection()
    try:
        files = con.execute(
            f"SELECT manifest_content, status, content FROM iceberg_metadata('{location}')"
        ).fetchall()
    finally:
        con.close()
    assert sorted(files) == [
        ("DATA", "ADDED", "EXISTING"),  # DuckDB labels data content so (Java's files too)
        ("DATA", "ADDED", "EXISTING"),
        ("DELETE", "ADDED", "EQUALITY_DELETES"),
        ("DELETE", "ADDED", "POSITION_DELETES"),
    ]


def test_pyiceberg_scans_a_table_made_of_our_manifests(tmp_path: Path) -> None:
    location, first = _table_of_our_manifests(tmp_path / "t")
    # pyiceberg refuses equality deletes: read the snapshot before them
    rows = pyiceberg_table(location).scan(snapshot_id=first).to_arrow().to_pylist()
    assert sorted(r["id"] for r in rows) == [1, 2, 3, 4]


@pytest.mark.interop
@pytest.mark.skipif(not JAVA_ICEBERG.exists(), reason="java-iceberg launcher not present")
def test_java_reads_a_table_made_of_our_manifests(tmp_path: Path) -> None:
    location, first = _table_of_our_manifests(tmp_path / "t")
    current_t, before_t = read_with_java([location, f"{location}@{first}"])
    current, before = current_t.to_pylist(), before_t.to_pylist()
    assert sorted(r["id"] for r in current) == [1, 3]
    assert sorted(r["id"] for r in before) == [1, 2, 3, 4]


def test_values_that_do_not_fit_the_schema_name_the_file(tmp_path: Path) -> None:
    writer = _writer(tmp_path, "bad.avro")
    writer.add(_data_file("a", WIDE_VALUES, record_count="many"))
    with pytest.raises(ValidationError, match=r"bad\.avro"):
        writer.close()
    assert not (tmp_path / "bad.avro").exists()


def test_a_manifest_holding_more_entries_than_its_list_counts_is_refused(
    written: tuple[ManifestFile, str],
) -> None:
    """The list counts 50 files; a manifest claiming 50 more is read no further."""
    manifest, _ = written
    assert len(read_manifest(IO, manifest)) == 50
    short = replace(manifest, added_files_count=30, existing_files_count=0, deleted_files_count=0)
    with pytest.raises(CorruptMetadataError, match=r"more than the 30 expected") as e:
        read_manifest(IO, short)
    assert manifest.manifest_path in str(e.value)
    unknown = replace(manifest, added_files_count=None)  # older lists: no bound but the bytes'
    assert len(read_manifest(IO, unknown)) == 50

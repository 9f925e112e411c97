"""Avro schemas of manifests and manifest lists, and Avro file reading/writing.

The schemas are the spec's (v1 and v2) manifest_entry / manifest_file structs,
turned into Avro the way Java's AvroSchemaUtil does it, because DuckDB and Java
read these files:

- every record field carries ``field-id``; optional fields are ``["null", T]``
  unions with ``"default": null``; names that are not valid Avro names are
  sanitized and keep the original in ``iceberg-field-name``;
- nested records are named ``r<field id>`` (``r2`` data_file, ``r102`` partition,
  ``r508`` partition summary); arrays carry ``element-id``;
- maps with non-string keys are arrays of ``k<key id>_v<value id>`` records with
  ``"logicalType": "map"``;
- date/time/timestamp/decimal/uuid/fixed use Avro logical types; a named type
  (``decimal_P_S``, ``fixed_N``, ``uuid_fixed``) is defined once and referenced by
  name afterwards.

Reading goes by field id, never by name, and strips logical types so values come
back in their internal form (ints for dates and times, bytes for fixed).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from typing import Any

import fastavro

from stream_sink.exceptions import CorruptMetadataError, ValidationError
from stream_sink.io.fileio import FileIO
from stream_sink.table import avro_blocks as blocks
from stream_sink.table.conversions import decimal_required_bytes
from stream_sink.table.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
    field_to_json,
)

AvroSchema = Any  # a JSON value: str, list or dict

# --- the spec's structs --------------------------------------------------------


def _req(fid: int, name: str, t: IcebergType, doc: str | None = None) -> NestedField:
    return NestedField(fid, name, t, True, doc)


def _opt(fid: int, name: str, t: IcebergType, doc: str | None = None) -> NestedField:
    return NestedField(fid, name, t, False, doc)


def _long_map(fid: int, name: str, key_id: int, doc: str) -> NestedField:
    return _opt(fid, name, MapType(key_id, IntegerType(), key_id + 1, LongType(), True), doc)


def _bytes_map(fid: int, name: str, key_id: int, doc: str) -> NestedField:
    return _opt(fid, name, MapType(key_id, IntegerType(), key_id + 1, BinaryType(), True), doc)


CONTENT = _opt(
    134,
    "content",
    IntegerType(),
    "Contents of the file: 0=data, 1=position deletes, 2=equality deletes",
)
FILE_PATH = _req(100, "file_path", StringType(), "Location URI with FS scheme")
FILE_FORMAT = _req(101, "file_format", StringType(), "File format name: avro, orc, or parquet")
RECORD_COUNT = _req(103, "record_count", LongType(), "Number of records in the file")
FILE_SIZE = _req(104, "file_size_in_bytes", LongType(), "Total file size in bytes")
BLOCK_SIZE = _req(105, "block_size_in_bytes", LongType())
COLUMN_SIZES = _long_map(108, "column_sizes", 117, "Map of column id to total size on disk")
VALUE_COUNTS = _long_map(
    109, "value_counts", 119, "Map of column id to total count, including null and NaN"
)
NULL_VALUE_COUNTS = _long_map(110, "null_value_counts", 121, "Map of column id to null value count")
NAN_VALUE_COUNTS = _long_map(
    137, "nan_value_counts", 138, "Map of column id to number of NaN values in the column"
)
LOWER_BOUNDS = _bytes_map(125, "lower_bounds", 126, "Map of column id to lower bound")
UPPER_BOUNDS = _bytes_map(128, "upper_bounds", 129, "Map of column id to upper bound")
KEY_METADATA = _opt(131, "key_metadata", BinaryType(), "Encryption key metadata blob")
SPLIT_OFFSETS = _opt(132, "split_offsets", ListType(133, LongType(), True), "Splittable offsets")
EQUALITY_IDS = _opt(
    135, "equality_ids", ListType(136, IntegerType(), True), "Equality comparison field IDs"
)
SORT_ORDER_ID = _opt(140, "sort_order_id", IntegerType(), "Sort order ID")
REFERENCED_DATA_FILE = _opt(
    143,
    "referenced_data_file",
    StringType(),
    "Fully qualified location (URI with FS scheme) of a data file that all deletes reference",
)
FIRST_ROW_ID = _opt(
    142, "first_row_id", LongType(), "The first row ID assigned to the first row in the data file"
)
CONTENT_OFFSET = _opt(
    144, "content_offset", LongType(), "The offset in the file where the content starts"
)
CONTENT_SIZE = _opt(
    145,
    "content_size_in_bytes",
    LongType(),
    "The length of referenced content stored in the file",
)
PARTITION_ID = 102
PARTITION_DOC = "Partition data tuple, schema based on the partition spec"


def data_file_type(partition_type: StructType, format_version: int) -> StructType:
    """The data_file struct (field 2) of a manifest entry, as Java's V1/V2/V3Metadata
    write it (v3 adds first_row_id, content_offset and content_size_in_bytes)."""
    if format_version == 1:
        partition = _req(PARTITION_ID, "partition", partition_type)
        return StructType(
            FILE_PATH,
            FILE_FORMAT,
            partition,
            RECORD_COUNT,
            FILE_SIZE,
            BLOCK_SIZE,
            COLUMN_SIZES,
            VALUE_COUNTS,
            NULL_VALUE_COUNTS,
            NAN_VALUE_COUNTS,
            LOWER_BOUNDS,
            UPPER_BOUNDS,
            KEY_METADATA,
            SPLIT_OFFSETS,
            SORT_ORDER_ID,
        )
    partition = _req(PARTITION_ID, "partition", partition_type, PARTITION_DOC)
    content = _req(CONTENT.field_id, CONTENT.name, CONTENT.field_type, CONTENT.doc)
    common = (
        content,
        FILE_PATH,
        FILE_FORMAT,
        partition,
        RECORD_COUNT,
        FILE_SIZE,
        COLUMN_SIZES,
        VALUE_COUNTS,
        NULL_VALUE_COUNTS,
        NAN_VALUE_COUNTS,
        LOWER_BOUNDS,
        UPPER_BOUNDS,
        KEY_METADATA,
        SPLIT_OFFSETS,
        EQUALITY_IDS,
        SORT_ORDER_ID,
    )
    if format_version == 2:
        return StructType(*common, REFERENCED_DATA_FILE)
    return StructType(*common, FIRST_ROW_ID, REFERENCED_DATA_FILE, CONTENT_OFFSET, CONTENT_SIZE)


def manifest_entry_type(partition_type: StructType, format_version: int) -> StructType:
    status = _req(0, "status", IntegerType())
    snapshot_id = _opt(1, "snapshot_id", LongType())
    data_file = _req(2, "data_file", data_file_type(partition_type, format_version))
    if format_version == 1:
        return StructType(status, snapshot_id, data_file)
    sequence_number = _opt(3, "sequence_number", LongType())
    file_sequence_number = _opt(4, "file_sequence_number", LongType())
    return StructType(status, snapshot_id, sequence_number, file_sequence_number, data_file)


FIELD_SUMMARY_TYPE = StructType(
    _req(509, "contains_null", BooleanType(), "True if any file has a null partition value"),
    _opt(518, "contains_nan", BooleanType(), "True if any file has a nan partition value"),
    _opt(510, "lower_bound", BinaryType(), "Partition lower bound for all files"),
    _opt(511, "upper_bound", BinaryType(), "Partition upper bound for all files"),
)


def manifest_file_type(format_version: int) -> StructType:
    """The manifest list's manifest_file struct, as Java's V1/V2/V3Metadata write it
    (v3 adds first_row_id, 520)."""
    path = _req(500, "manifest_path", StringType(), "Location URI with FS scheme")
    length = _req(501, "manifest_length", LongType(), "Total file size in bytes")
    spec_id = _req(502, "partition_spec_id", IntegerType(), "Spec ID used to write")
    snapshot = _req(503, "added_snapshot_id", LongType(), "Snapshot ID that added the manifest")
    v2 = format_version >= 2
    count = _req if v2 else _opt
    added = count(504, "added_files_count", IntegerType(), "Added entry count")
    existing = count(505, "existing_files_count", IntegerType(), "Existing entry count")
    deleted = count(506, "deleted_files_count", IntegerType(), "Deleted entry count")
    added_rows = count(512, "added_rows_count", LongType(), "Added rows count")
    existing_rows = count(513, "existing_rows_count", LongType(), "Existing rows count")
    deleted_rows = count(514, "deleted_rows_count", LongType(), "Deleted rows count")
    partitions = _opt(
        507, "partitions", ListType(508, FIELD_SUMMARY_TYPE, True), "Summary for each partition"
    )
    key_metadata = _opt(519, "key_metadata", BinaryType(), "Encryption key metadata blob")
    if not v2:
        return StructType(
            path,
            length,
            spec_id,
            snapshot,
            added,
            existing,
            deleted,
            partitions,
            added_rows,
            existing_rows,
            deleted_rows,
            key_metadata,
        )
    content = _req(517, "content", IntegerType(), "Contents of the manifest: 0=data, 1=deletes")
    seq = _req(515, "sequence_number", LongType(), "Sequence number when the manifest was added")
    min_seq = _req(516, "min_sequence_number", LongType(), "Lowest sequence number in the manifest")
    v3 = (FIRST_ROW_ID_520,) if format_version >= 3 else ()
    return StructType(
        path,
        length,
        spec_id,
        content,
        seq,
        min_seq,
        snapshot,
        added,
        existing,
        deleted,
        added_rows,
        existing_rows,
        deleted_rows,
        partitions,
        key_metadata,
        *v3,
    )


FIRST_ROW_ID_520 = _opt(
    520, "first_row_id", LongType(), "Starting row ID to assign to new rows in ADDED data files"
)


# --- Iceberg type -> Avro schema -------------------------------------------------


def avro_schema(struct: StructType, record_name: str) -> dict[str, Any]:
    """The Avro record schema Java's AvroSchemaUtil.convert(struct, name) produces."""
    return _AvroBuilder().record(struct, record_name)


class _AvroBuilder:
    def __init__(self) -> None:
        self._named: set[str] = set()

    def _define(self, name: str, schema: dict[str, Any]) -> AvroSchema:
        if name in self._named:
            return name
        self._named.add(name)
        return schema

    def record(self, struct: StructType, name: str) -> dict[str, Any]:
        fields = [self.field(f) for f in struct.fields]
        self._named.add(name)
        return {"type": "record", "name": name, "fields": fields}

    def field(self, f: NestedField) -> dict[str, Any]:
        schema = self.type(f.field_type, f.field_id)
        out: dict[str, Any] = {"name": avro_name(f.name)}
        out["type"] = ["null", schema] if f.optional else schema
        if f.doc is not None:
            out["doc"] = f.doc
        if f.optional:
            out["default"] = None
        if out["name"] != f.name:
            out["iceberg-field-name"] = f.name
        out["field-id"] = f.field_id
        return out

    def type(self, t: IcebergType, field_id: int) -> AvroSchema:
        if isinstance(t, StructType):
            return self.record(t, f"r{field_id}")
        if isinstance(t, ListType):
            element = self.type(t.element_type, t.element_id)
            items = element if t.element_required else ["null", element]
            return {"type": "array", "items": items, "element-id": t.element_id}
        if isinstance(t, MapType):
            return self.map(t)
        return self.primitive(t)

    def map(self, t: MapType) -> AvroSchema:
        key = self.type(t.key_type, t.key_id)
        value = self.type(t.value_type, t.value_id)
        if not t.value_required:
            value = ["null", value]
        if isinstance(t.key_type, StringType):
            return {"type": "map", "values": value, "key-id": t.key_id, "value-id": t.value_id}
        value_field: dict[str, Any] = {"name": "value", "type": value}
        if not t.value_required:
            value_field["default"] = None
        value_field["field-id"] = t.value_id
        record = {
            "type": "record",
            "name": f"k{t.key_id}_v{t.value_id}",
            "fields": [{"name": "key", "type": key, "field-id": t.key_id}, value_field],
        }
        return {"type": "array", "items": record, "logicalType": "map"}

    def primitive(self, t: IcebergType) -> AvroSchema:
        simple = _SIMPLE.get(type(t))
        if simple is not None:
            return dict(simple) if isinstance(simple, dict) else simple
        if isinstance(t, UUIDType):
            schema = {"type": "fixed", "name": "uuid_fixed", "size": 16, "logicalType": "uuid"}
            return self._define("uuid_fixed", schema)
        if isinstance(t, FixedType):
            name = f"fixed_{t.length}"
            return self._define(name, {"type": "fixed", "name": name, "size": t.length})
        if isinstance(t, DecimalType):
            name = f"decimal_{t.precision}_{t.scale}"
            schema = {
                "type": "fixed",
                "name": name,
                "size": decimal_required_bytes(t.precision),
                "logicalType": "decimal",
                "precision": t.precision,
                "scale": t.scale,
            }
            return self._define(name, schema)
        raise CorruptMetadataError(f"type {t} cannot be written to Avro")


_SIMPLE: dict[type, AvroSchema] = {
    BooleanType: "boolean",
    IntegerType: "int",
    LongType: "long",
    FloatType: "float",
    DoubleType: "double",
    StringType: "string",
    BinaryType: "bytes",
    DateType: {"type": "int", "logicalType": "date"},
    TimeType: {"type": "long", "logicalType": "time-micros"},
    TimestampType: {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": False},
    TimestamptzType: {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": True},
    TimestampNanoType: {"type": "long", "logicalType": "timestamp-nanos", "adjust-to-utc": False},
    TimestamptzNanoType: {"type": "long", "logicalType": "timestamp-nanos", "adjust-to-utc": True},
}


def avro_name(name: str) -> str:
    """``name`` if it is a valid Avro name, else Java's sanitized form of it."""
    units = _utf16_units(name)
    out = []
    for i, c in enumerate(units):
        ok = c.isalpha() or c == "_" or (i > 0 and c.isdigit())
        out.append(c if ok else ("_" + c if c.isdigit() else f"_x{ord(c):X}"))
    return "".join(out)


def _utf16_units(name: str) -> list[str]:
    units: list[str] = []
    for c in name:
        cp = ord(c)
        if cp <= 0xFFFF:
            units.append(c)
        else:
            cp -= 0x10000
            units += [chr(0xD800 + (cp >> 10)), chr(0xDC00 + (cp & 0x3FF))]
    return units


# --- files -------------------------------------------------------------------------


def write_avro_file(
    fileio: FileIO,
    location: str,
    struct: StructType,
    record_name: str,
    records: Iterable[Mapping[str, Any]],
    metadata: Mapping[str, str],
) -> int:
    """Write an Avro container file (deflate) in one piece; returns its length in bytes.

    The header gets ``metadata`` plus ``iceberg.schema`` (``struct`` as an Iceberg
    schema), as Java's Avro writer adds it.
    """
    header = dict(metadata)
    header["iceberg.schema"] = compact_json(
        {"type": "struct", "schema-id": 0, "fields": [field_to_json(f) for f in struct.fields]}
    )
    schema = fastavro.parse_schema(avro_schema(struct, record_name))
    buf = io.BytesIO()
    try:
        fastavro.writer(buf, schema, records, codec="deflate", metadata=header)
    except (ValueError, TypeError, OverflowError) as e:
        raise ValidationError(f"cannot write Avro file {location}: {e}") from e
    data = buf.getvalue()
    fileio.write_bytes(location, data, overwrite=True)
    return len(data)


def compact_json(value: Any) -> str:
    """JSON without spaces, as Java writes header values."""
    return json.dumps(value, separators=(",", ":"))


class AvroContents:
    """A decoded Avro file: header metadata, the writer schema and the records.

    ``schema`` is parsed once per distinct schema text and shared by every file written
    with it (a table's manifests share a handful): read it, never change it."""

    def __init__(
        self,
        metadata: dict[str, str],
        schema: dict[str, Any],
        records: list[Any],
        schema_text: str = "",
    ):
        self.metadata = metadata
        self.schema = schema
        self.records = records
        self.schema_text = schema_text
        """The writer schema as the header holds it (a cache key for decoders)."""


def read_avro_file(fileio: FileIO, location: str, max_records: int | None = None) -> AvroContents:
    """Read a whole Avro file; damage raises CorruptMetadataError naming ``location``.

    Records use the writer's field names; logical types are not decoded (the records
    are read with the writer schema stripped of them). Blocks compressed with ``null``,
    ``deflate``, ``bzip2``, ``xz`` or ``zstandard`` are decoded here with the schema
    parsed once per distinct schema text; other codecs go through fastavro's block
    reader. Either way no count is trusted (:mod:`stream_sink.table.avro_blocks`): a
    file claiming more records than its bytes hold, or than ``max_records`` (the
    cardinality the caller expects), stops before they are decoded.
    """
    return decode_avro(fileio.read_bytes(location), location, max_records)


def decode_avro(data: bytes, location: str, max_records: int | None = None) -> AvroContents:
    """The Avro container file ``data`` (read from ``location``), as
    :func:`read_avro_file` reads it."""
    try:
        stream = io.BytesIO(data)
        header = fastavro.schemaless_reader(stream, _HEADER_SCHEMA, None)
        if not isinstance(header, dict) or header["magic"] != b"Obj\x01":
            raise ValueError("not an Avro container file (bad magic)")
        meta = dict(header["meta"])
        schema_text = _text(meta["avro.schema"])
        schema, meta["avro.schema"], parsed, min_bytes = _parsed_schema(schema_text)
        codec = _text(meta.get("avro.codec", b"null"))
        if codec in blocks.CODECS:
            records = blocks.read_blocks(
                stream, len(data), header["sync"], codec, parsed, min_bytes, max_records
            )
        else:
            plain = io.BytesIO()
            fastavro.schemaless_writer(plain, _HEADER_SCHEMA, dict(header, meta=meta))
            plain.write(data[stream.tell() :])
            plain.seek(0)
            records = blocks.read_with_fastavro(plain, min_bytes, max_records)
        metadata = {k: _text(v) for k, v in header["meta"].items()}
    except Exception as e:  # fastavro raises many unrelated types on damaged input
        raise CorruptMetadataError(f"cannot read Avro file {location}: {e!r}") from e
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise CorruptMetadataError(f"Avro file {location} does not hold records")
    return AvroContents(metadata, schema, records, schema_text)


@lru_cache(maxsize=64)
def _parsed_schema(text: str) -> tuple[Any, bytes, Any, int]:
    """The writer schema as JSON, its text without logical types (see
    :func:`read_avro_file`), that schema parsed for fastavro and the fewest bytes one
    of its records takes; once per schema."""
    schema = json.loads(text)
    plain = strip_logical_types(schema)
    parsed = fastavro.parse_schema(plain)
    return schema, json.dumps(plain).encode("utf-8"), parsed, blocks.min_record_bytes(parsed)


# The container file header (Avro spec, "Object Container Files").
_HEADER_SCHEMA = fastavro.parse_schema(
    {
        "type": "record",
        "name": "org.apache.avro.file.Header",
        "fields": [
            {"name": "magic", "type": {"type": "fixed", "name": "magic", "size": 4}},
            {"name": "meta", "type": {"type": "map", "values": "bytes"}},
            {"name": "sync", "type": {"type": "fixed", "name": "sync", "size": 16}},
        ],
    }
)


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


def strip_logical_types(schema: AvroSchema) -> AvroSchema:
    if isinstance(schema, list):
        return [strip_logical_types(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: v for k, v in schema.items() if k not in ("logicalType", "precision", "scale")}
    if "fields" in out:
        out["fields"] = [dict(f, type=strip_logical_types(f["type"])) for f in out["fields"]]
    for key in ("items", "values"):
        if key in out:
            out[key] = strip_logical_types(out[key])
    return out


# --- reading records by field id --------------------------------------------------


class RecordView:
    """Field-id access to the records of one Avro record schema (names as the writer chose)."""

    def __init__(self, record_schema: Mapping[str, Any]) -> None:
        self._names: dict[int, str] = {}
        self._schemas: dict[int, AvroSchema] = {}
        for f in record_schema.get("fields", []):
            fid = f.get("field-id")
            if fid is not None:
                self._names[int(fid)] = f["name"]
                self._schemas[int(fid)] = f["type"]

    def has(self, field_id: int) -> bool:
        return field_id in self._names

    def get(self, record: Mapping[str, Any], field_id: int, default: Any = None) -> Any:
        name = self._names.get(field_id)
        if name is None:
            return default
        return record.get(name, default)

    def child(self, field_id: int, named: Mapping[str, AvroSchema]) -> RecordView:
        """The view of the record nested in field ``field_id`` (unions and arrays unwrapped)."""
        schema = resolve(self._schemas.get(field_id, {}), named)
        while True:
            if isinstance(schema, list):
                schema = resolve(next(s for s in schema if s != "null"), named)
            elif isinstance(schema, dict) and schema.get("type") == "array":
                schema = resolve(schema["items"], named)
            else:
                break
        return RecordView(schema if isinstance(schema, dict) else {})

    def schema_of(self, field_id: int) -> AvroSchema:
        return self._schemas.get(field_id)

    def field_ids(self) -> list[int]:
        return list(self._names)

    def name_of(self, field_id: int) -> str | None:
        return self._names.get(field_id)


def named_types(schema: AvroSchema) -> dict[str, AvroSchema]:
    """Every named type defined in ``schema`` by name (to follow references); the
    result holds ``schema``'s own dicts, so it is read-only like them."""
    out: dict[str, AvroSchema] = {}

    def walk(s: AvroSchema) -> None:
        if isinstance(s, list):
            for x in s:
                walk(x)
        elif isinstance(s, dict):
            if "name" in s and s.get("type") in ("record", "fixed", "enum"):
                out[s["name"]] = s
            for f in s.get("fields", []):
                walk(f["type"])
            for key in ("items", "values"):
                if key in s:
                    walk(s[key])

    walk(schema)
    return out


def resolve(schema: AvroSchema, named: Mapping[str, AvroSchema]) -> AvroSchema:
    if isinstance(schema, str) and schema in named:
        return named[schema]
    if isinstance(schema, dict) and isinstance(schema.get("type"), (dict, list)):
        return resolve(schema["type"], named)
    return schema


def iter_pairs(value: Any) -> Iterator[tuple[Any, Any]]:
    """Key/value pairs of an Avro-encoded Iceberg map (array of k/v records or Avro map)."""
    if value is None:
        return
    if isinstance(value, dict):
        yield from value.items()
    else:
        for kv in value:
            yield kv["key"], kv["value"]

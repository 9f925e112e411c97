"""Table metadata JSON: what Java, pyiceberg and DuckDB read, and what they write."""

from __future__ import annotations

import json

import pytest

from stream_sink.exceptions import (
    CorruptMetadataError,
    NoSuchRefError,
    NoSuchSnapshotError,
    UnsupportedError,
)
from stream_sink.table.metadata import new_table_metadata, parse_metadata
from stream_sink.table.partitioning import build_partition_spec
from stream_sink.table.schema import Schema
from stream_sink.table.snapshots import Snapshot
from stream_sink.table.sorting import UNSORTED_SORT_ORDER
from stream_sink.table.types import (
    LongType,
    NestedField,
    StringType,
    TimestampType,
    primitive_from_string,
)

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "data", StringType()),
    NestedField(3, "ts", TimestampType()),
    identifier_field_ids=[1],
)

# The shape Java Iceberg 1.x writes for a v1 table with one snapshot (spec example fields).
JAVA_V1 = {
    "format-version": 1,
    "table-uuid": "d20125c8-7284-442c-9aea-15fee620737c",
    "location": "/wh/db/t",
    "last-updated-ms": 1602638573874,
    "last-column-id": 3,
    "schema": {
        "type": "struct",
        "fields": [
            {"id": 1, "name": "x", "required": True, "type": "long"},
            {"id": 2, "name": "y", "required": True, "type": "long"},
            {"id": 3, "name": "z", "required": True, "type": "long"},
        ],
    },
    "partition-spec": [{"name": "x", "transform": "identity", "source-id": 1, "field-id": 1000}],
    "properties": {},
    "current-snapshot-id": 3051729675574597004,
    "snapshots": [
        {
            "snapshot-id": 3051729675574597004,
            "timestamp-ms": 1515100955770,
            "summary": {"operation": "append"},
            "manifest-list": "/wh/db/t/metadata/snap-3051729675574597004.avro",
        }
    ],
    "snapshot-log": [{"timestamp-ms": 1515100955770, "snapshot-id": 3051729675574597004}],
    "metadata-log": [],
}


def snap(sid: int, parent: int | None, seq: int, ts: int = 1000) -> Snapshot:
    return Snapshot(sid, parent, seq, ts, f"/t/metadata/snap-{sid}.avro", {"operation": "append"})


def test_new_table_round_trips_through_json() -> None:
    spec = build_partition_spec(SCHEMA, [("day", "ts"), ("bucket", "id", 16)])
    meta = new_table_metadata(SCHEMA, spec, UNSORTED_SORT_ORDER, "/wh/db/t/", {"a": "1"})
    back = parse_metadata(meta.to_json())
    assert back == meta
    doc = json.loads(meta.to_json())
    assert doc["format-version"] == 2
    assert doc["location"] == "/wh/db/t"
    assert doc["current-snapshot-id"] == -1
    assert doc["last-partition-id"] == 1001
    assert doc["schemas"][0]["identifier-field-ids"] == [1]


def test_v1_metadata_from_java_is_read() -> None:
    meta = parse_metadata(json.dumps(JAVA_V1))
    assert meta.format_version == 1
    assert meta.schema.column_names == ["x", "y", "z"]
    assert meta.spec.fields[0].name == "x"
    assert meta.current_snapshot().snapshot_id == 3051729675574597004  # type: ignore[union-attr]
    assert meta.refs["main"].snapshot_id == 3051729675574597004
    assert meta.next_sequence_number == 0


def test_snapshots_branches_and_ancestry() -> None:
    meta = new_table_metadata(SCHEMA, build_partition_spec(SCHEMA, []), UNSORTED_SORT_ORDER, "/t")
    meta = meta.with_snapshot(snap(1, None, 1, 1000))
    meta = meta.with_snapshot(snap(2, 1, 2, 2000))
    meta = meta.with_snapshot(snap(3, 1, 3, 3000), branch="audit")
    assert meta.current_snapshot_id == 2
    assert meta.snapshot_for_ref("audit").snapshot_id == 3  # type: ignore[union-attr]
    assert [s.snapshot_id for s in meta.ancestors(3)] == [3, 1]
    assert meta.snapshot_as_of(2500).snapshot_id == 2
    assert meta.last_sequence_number == 3
    back = parse_metadata(meta.to_json())
    assert back.refs == meta.refs
    assert back.snapshots == meta.snapshots
    with pytest.raises(NoSuchRefError, match="nope"):
        meta.snapshot_for_ref("nope")
    with pytest.raises(NoSuchSnapshotError, match="42"):
        meta.snapshot_by_id(42)
    with pytest.raises(NoSuchSnapshotError):
        meta.snapshot_as_of(10)


def test_metadata_log_keeps_previous_versions_max() -> None:
    meta = new_table_metadata(
        SCHEMA,
        build_partition_spec(SCHEMA, []),
        UNSORTED_SORT_ORDER,
        "/t",
        {"write.metadata.previous-versions-max": "2"},
    )
    for i in range(5):
        meta = meta.with_metadata_log_entry(f"/t/metadata/v{i}.metadata.json", i)
    assert [e.value for e in meta.metadata_log] == [
        "/t/metadata/v3.metadata.json",
        "/t/metadata/v4.metadata.json",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"format-version": 2}', "malformed"),
        ("[]", "not a JSON object"),
    ],
)
def test_corrupt_metadata_names_the_file(text: str, message: str) -> None:
    with pytest.raises(CorruptMetadataError, match=message) as e:
        parse_metadata(text, where="/wh/db/t/metadata/v3.metadata.json")
    assert "/wh/db/t/metadata/v3.metadata.json" in str(e.value)


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    "text",
    [
        DEEP,
        '{"format-version": 2, "schemas": ' + DEEP + "}",
        '{"format-version": 1e400}',
        '{"format-version": ' + "9" * 5000 + "}",
        json.dumps({**JAVA_V1, "current-snapshot-id": "1e400"}).replace('"1e400"', "1e400"),
        json.dumps({**JAVA_V1, "properties": ["a"]}),
        json.dumps({**JAVA_V1, "snapshots": [[]]}),
        json.dumps({**JAVA_V1, "format-version": 2, "schemas": [], "current-schema-id": 0}),
    ],
    ids=["nested past the recursion limit", "nested schemas", "version 1e400",
         "a 5000-digit version", "snapshot id 1e400", "properties a list",
         "a snapshot a list", "no schemas"],
)  # fmt: skip
def test_crafted_metadata_is_corruption_naming_the_file(text: str) -> None:
    where = "/wh/db/t/metadata/v3.metadata.json"
    with pytest.raises(CorruptMetadataError) as e:
        parse_metadata(text, where=where)
    assert where in str(e.value)


@pytest.mark.parametrize(
    ("version", "message"),
    [(4, "format version 4 is newer"), (9, "format version 9 is newer")],
)
def test_unsupported_format_versions_are_refused_naming_them_not_as_damage(
    version: int, message: str
) -> None:
    with pytest.raises(UnsupportedError, match=message) as e:
        parse_metadata(f'{{"format-version": {version}}}', where="/t/metadata/v3.metadata.json")
    assert "/t/metadata/v3.metadata.json" in str(e.value)
    assert not isinstance(e.value, CorruptMetadataError)


def test_v3_types_are_refused_naming_them() -> None:
    for name in ("variant", "geometry", "geography(OGC:CRS84)"):
        with pytest.raises(UnsupportedError, match=rf"{name[:8]}.*format version 3"):
            primitive_from_string(name)


def test_schema_and_spec_evolution_reuse_identical_versions() -> None:
    meta = new_table_metadata(SCHEMA, build_partition_spec(SCHEMA, []), UNSORTED_SORT_ORDER, "/t")
    wider = Schema(*SCHEMA.fields, NestedField(4, "extra", StringType()), identifier_field_ids=[1])
    meta2 = meta.with_schema(wider)
    assert meta2.current_schema_id == 1 and meta2.last_column_id == 4
    assert meta2.with_schema(SCHEMA).current_schema_id == 0
    meta3 = meta2.with_spec(build_partition_spec(wider, [("identity", "data")]))
    assert meta3.default_spec_id == 1
    assert meta3.spec.fields[0].name == "data"


def test_v1_snapshots_may_list_their_manifests_in_the_metadata() -> None:
    obj = {"snapshot-id": 7, "timestamp-ms": 1, "manifests": ["/t/m1.avro", "/t/m2.avro"]}
    snap = Snapshot.from_json(obj)
    assert (snap.manifest_list, snap.manifests) == ("", ("/t/m1.avro", "/t/m2.avro"))
    assert snap.to_json(1)["manifests"] == ["/t/m1.avro", "/t/m2.avro"]
    with pytest.raises(CorruptMetadataError, match="neither a manifest-list nor"):
        Snapshot.from_json({"snapshot-id": 7, "timestamp-ms": 1})

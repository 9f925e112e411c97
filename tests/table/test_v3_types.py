"""The format version 3 types ``timestamp_ns``, ``timestamptz_ns`` and ``unknown``: schema
JSON, what v1/v2 tables refuse, Parquet and manifest forms, partition transforms, filters,
defaults and upsert keys, read back by ours, pyiceberg and DuckDB (which reads
``timestamp_ns`` but neither ``timestamptz_ns`` nor ``unknown``). Apache Iceberg Java reads
the same shapes in ``tests/interop/test_v3_types_interop.py``."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from readers import duckdb_connection, pyiceberg_table

from stream_sink.exceptions import SchemaMismatchError, ValidationError
from stream_sink.table.catalog import Catalog
from stream_sink.table.manifest import ManifestContent, read_manifest, snapshot_manifests
from stream_sink.table.nanos import format_nanos, parse_nanos
from stream_sink.table.schema import Schema
from stream_sink.table.transforms import Bucket, Day, Hour, Identity, Month, Year
from stream_sink.table.types import (
    NestedField,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    UnknownType,
    type_from_json,
)
from stream_sink.tables import IcebergTable

NS = pa.timestamp("ns")
NS_UTC = pa.timestamp("ns", tz="UTC")
SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), pa.field("ts", NS),
     pa.field("tz", NS_UTC), pa.field("u", pa.null())]
)  # fmt: skip
#: the spec's bucket examples, one before the epoch, and a sub-microsecond one
VALUES = [
    parse_nanos("2017-11-16T22:31:08", False),
    parse_nanos("2017-11-16T22:31:08.000001001", False),
    parse_nanos("1969-12-31T23:59:59.999999999", False),
    5,
]


def rows(ids: list[int], ts: list[int | None], tz: list[int | None] | None = None) -> pa.Table:
    return pa.table(
        {"id": ids, "ts": pa.array(ts, NS), "tz": pa.array(ts if tz is None else tz, NS_UTC)}
    )


def ours(t: IcebergTable, **scan: Any) -> list[tuple[Any, ...]]:
    return as_tuples(t.refresh().scan(**scan).to_arrow())


def as_tuples(table: pa.Table) -> list[tuple[Any, ...]]:
    """(id, ts, tz, u) with timestamps as int nanoseconds, sorted by id."""
    cols = [
        table.column(n).cast(pa.int64()).to_pylist() if n in ("ts", "tz") else table.column(n)
        for n in ("id", "ts", "tz")
    ]
    ids, ts, tz = cols[0].to_pylist(), cols[1], cols[2]  # type: ignore[union-attr]
    u = table.column("u").to_pylist() if "u" in table.column_names else [None] * len(ids)
    return sorted(zip(ids, ts, tz, u, strict=True))


def duckdb_ns(location: str) -> list[tuple[int, int | None]]:
    """(id, ts) of a table whose only other column is ``ts`` (timestamp_ns), as DuckDB
    reads it, ``ts`` as int nanoseconds."""
    con = duckdb_connection()
    try:
        sql = f"SELECT id, epoch_ns(ts) FROM iceberg_scan('{location}') ORDER BY id"
        return [(int(a), None if b is None else int(b)) for a, b in con.execute(sql).fetchall()]
    finally:
        con.close()


def id_ts(table: pa.Table) -> list[tuple[int, int]]:
    ts = table["ts"].cast(pa.int64()).to_pylist()
    return sorted(zip(table["id"].to_pylist(), ts, strict=True))


def live_data_files(t: IcebergTable) -> list[Any]:
    out = []
    for m in snapshot_manifests(t.io, t.refresh().current_snapshot()):
        if m.content == ManifestContent.DATA:
            out += [e.data_file for e in read_manifest(t.io, m) if e.is_live]
    return out


def test_v3_types_parse_print_and_need_format_version_3(hadoop_catalog: Catalog) -> None:
    for name, t in (
        ("timestamp_ns", TimestampNanoType()),
        ("timestamptz_ns", TimestamptzNanoType()),
        ("unknown", UnknownType()),
    ):
        assert type_from_json(name) == t and str(t) == name
    with pytest.raises(ValidationError, match=r"'ts' \(timestamp_ns\).*format_version=3"):
        hadoop_catalog.create_table(
            "db.v2", Schema(NestedField(1, "ts", TimestampNanoType())), format_version=2
        )
    with pytest.raises(ValidationError, match="unknown must be optional"):
        Schema(NestedField(1, "u", UnknownType(), required=True))
    v2 = hadoop_catalog.create_table("db.t", pa.schema([pa.field("id", pa.int64())]))
    with pytest.raises(ValidationError, match=r"'u' \(unknown\)"):
        v2.update_schema().add_column("u", "unknown").commit()
    v2.upgrade_format_version(3)
    v2.update_schema().add_column("u", "unknown").add_column("ts", "timestamptz_ns").commit()
    assert [str(f.field_type) for f in v2.refresh().schema().fields] == [
        "long",
        "unknown",
        "timestamptz_ns",
    ]
    nested = pa.struct([("at", NS_UTC), ("many", pa.list_(NS)), ("m", pa.map_(NS, NS_UTC))])
    t3 = hadoop_catalog.create_table("db.n3", pa.schema([("n", nested)]), format_version=3)
    assert str(t3.schema().find_type("n")) == (
        "struct<2: at: optional timestamptz_ns, 3: many: optional list<timestamp_ns>, "
        "4: m: optional map<timestamp_ns, timestamptz_ns>>"
    )
    value = {"at": VALUES[1], "many": [VALUES[2], None], "m": [(VALUES[3], VALUES[1])]}
    t3.append(pa.table({"n": pa.array([value], nested)}))
    for got in (t3.scan().to_arrow(), pyiceberg_table(t3.refresh().metadata_location).scan()
                .to_arrow()):  # fmt: skip
        n = got["n"].combine_chunks()
        assert n.field("at").cast(pa.int64()).to_pylist() == [VALUES[1]]
        assert n.field("many").flatten().cast(pa.int64()).to_pylist() == [VALUES[2], None]
        m = n.field("m")
        assert m.keys.cast(pa.int64()).to_pylist() == [VALUES[3]]
        assert m.items.cast(pa.int64()).to_pylist() == [VALUES[1]]
    # before v3 an Arrow nanosecond column stays a microsecond one (as it always was)
    v2b = hadoop_catalog.create_table("db.v2b", pa.schema([pa.field("ts", NS)]))
    assert str(v2b.schema().find_type("ts")) == "timestamp"


def test_nanosecond_timestamps_round_trip_exactly_in_files_manifests_and_readers(
    hadoop_catalog: Catalog,
) -> None:
    spec = [("hour", "ts"), ("bucket", "tz", 8)]
    t = hadoop_catalog.create_table("db.t", SCHEMA, spec, format_version=3)
    assert [str(f.field_type) for f in t.schema().fields] == [
        "long",
        "timestamp_ns",
        "timestamptz_ns",
        "unknown",
    ]
    t.append(rows([1, 2, 3, 4, 5], [*VALUES, None]))
    expected = sorted(
        zip([1, 2, 3, 4, 5], [*VALUES, None], [*VALUES, None], [None] * 5, strict=True)
    )
    assert ours(t) == expected
    assert as_tuples(pyiceberg_table(t.refresh().metadata_location).scan().to_arrow()) == expected

    files = live_data_files(t)
    for f in files:  # the spec: bounds of a nanosecond column are 8-byte longs of nanoseconds
        if f.null_value_counts[2] == f.record_count:
            assert f.partition[0] is None and 2 not in f.lower_bounds
            continue
        ts_lo, ts_hi = (struct.unpack("<q", b[2])[0] for b in (f.lower_bounds, f.upper_bounds))
        assert len(f.lower_bounds[2]) == 8 and ts_lo <= ts_hi
        assert 4 not in f.lower_bounds and 4 not in f.value_counts  # unknown: no metrics
        hour, bucket = f.partition
        assert hour == Hour().apply(pa.array([ts_lo], NS), TimestampNanoType())[0].as_py()
        tz_lo = pa.array([struct.unpack("<q", f.lower_bounds[3])[0]], NS_UTC)
        assert bucket == Bucket(8).apply(tz_lo, TimestamptzNanoType())[0].as_py()
        schema = pq.ParquetFile(f.file_path.removeprefix("file://")).schema
        assert schema.names == ["id", "ts", "tz"]  # unknown columns are not stored
        text = str(schema).lower()
        assert "timestamp(isadjustedtoutc=false, timeunit=nanoseconds" in text
        assert "timestamp(isadjustedtoutc=true, timeunit=nanoseconds" in text
    the_hours = {f.partition[0] for f in files}
    assert the_hours == {Hour().apply(pa.array([v], NS), TimestampNanoType())[0].as_py()
                         for v in [*VALUES, None]}  # fmt: skip

    # filters keep nanosecond precision, and prune by the hour partition and the bounds
    assert [r[0] for r in ours(t, row_filter=f"ts > '{format_nanos(VALUES[0], False)}'")] == [2]
    exact = format_nanos(VALUES[2], True)
    assert [r[0] for r in ours(t, row_filter=f"tz = '{exact}'")] == [3]
    assert [r[0] for r in ours(t, row_filter="ts < '1970-01-01T00:00:00.000000005'")] == [3]


def test_duckdb_reads_timestamp_ns_exactly(hadoop_catalog: Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("ts", NS)])
    t = hadoop_catalog.create_table("db.t", schema, [("day", "ts")], format_version=3)
    t.append(pa.table({"id": [1, 2, 3, 4], "ts": pa.array([*VALUES[:3], None], NS)}))
    assert duckdb_ns(t.metadata_location) == list(
        zip([1, 2, 3, 4], [*VALUES[:3], None], strict=True)
    )


def test_transforms_on_nanoseconds_follow_the_spec() -> None:
    ts = pa.array(VALUES, NS)
    # the spec's examples: nanoseconds are floored to microseconds before hashing
    hashes = Bucket(2**31 - 1).apply(ts, TimestampNanoType()).to_pylist()
    assert hashes[:2] == [(-2047944441) & 0x7FFFFFFF, (-1207196810) & 0x7FFFFFFF]
    micros = pa.array([v // 1000 for v in VALUES], pa.timestamp("us"))
    internal = pa.array(VALUES, pa.int64())  # internal values (partition filters) are nanos
    for transform in (Year(), Month(), Day(), Hour(), Bucket(7)):
        want = transform.apply(micros, TimestampType()).to_pylist()
        assert transform.apply(ts, TimestampNanoType()).to_pylist() == want
        assert transform.apply(internal, TimestamptzNanoType()).to_pylist() == want
    assert Day().apply(ts, TimestampNanoType()).to_pylist()[2] == -1  # floored before 1970
    human = Identity().to_human_string(TimestamptzNanoType(), VALUES[1])
    assert human == "2017-11-16T22:31:08.000001001+00:00"
    with pytest.raises(Exception, match="cannot be applied to type unknown"):
        Identity().result_type(UnknownType())


def test_upsert_keyed_on_nanoseconds_and_conversion(hadoop_catalog: Catalog) -> None:
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), pa.field("ts", NS, nullable=False)]
    )
    t = hadoop_catalog.create_table(
        "db.t", schema, [("day", "ts")], identifier_fields=["ts"], format_version=3
    )
    t.append(pa.table({"id": [1, 2, 3], "ts": pa.array(VALUES[:3], NS)}, schema))
    # the key VALUES[1] differs from VALUES[0] only below the microsecond
    t.upsert(pa.table({"id": [20, 40], "ts": pa.array([VALUES[1], VALUES[3]], NS)}, schema))
    want = [(1, VALUES[0]), (3, VALUES[2]), (20, VALUES[1]), (40, VALUES[3])]
    got = t.refresh().scan().to_arrow()
    assert id_ts(got) == want
    assert duckdb_ns(t.metadata_location) == want  # equality deletes on a nanosecond key
    t.maintenance.convert_equality_deletes()
    got = pyiceberg_table(t.refresh().metadata_location).scan().to_arrow()
    assert id_ts(got) == want


def test_microsecond_data_into_nanosecond_columns_and_defaults(hadoop_catalog: Catalog) -> None:
    t = hadoop_catalog.create_table("db.t", SCHEMA, format_version=3)
    micros = pa.table(
        {"id": [1], "ts": pa.array([1_500_000_000_123_456], pa.timestamp("us")),
         "tz": pa.array([-1], pa.timestamp("us", tz="UTC"))}
    )  # fmt: skip
    t.append(micros)  # Spark's timestamps are microseconds: widened exactly
    assert ours(t) == [(1, 1_500_000_000_123_456_000, -1000, None)]
    with pytest.raises(SchemaMismatchError, match="'u' has type long"):
        t.append(pa.table({"id": [2], "u": [7]}))  # unknown holds only nulls
    default = "2020-01-01T00:00:00.000000001"
    t.update_schema().add_column("d", "timestamp_ns", default=default).commit()
    t.append(pa.table({"id": [3]}))
    got = t.refresh().scan().to_arrow().sort_by("id")
    assert got["d"].cast(pa.int64()).to_pylist() == [parse_nanos(default, False)] * 2
    doc = t.refresh().schema().find_field("d")
    assert doc.write_default == f'"{default}"'


def test_an_unknown_column_gets_a_type_later(hadoop_catalog: Catalog) -> None:
    t = hadoop_catalog.create_table("db.t", SCHEMA, format_version=3)
    t.append(rows([1], [VALUES[0]]))
    t.update_schema().update_column("u", "string").commit()  # the spec: unknown -> any type
    t.append(pa.table({"id": [2], "u": ["now known"]}))
    location = t.refresh().metadata_location
    for got in (t.scan().to_arrow(), pyiceberg_table(location).scan().to_arrow()):
        assert sorted(zip(got["id"].to_pylist(), got["u"].to_pylist(), strict=True)) == [
            (1, None),
            (2, "now known"),
        ]


def test_v3_types_in_the_metadata_json(hadoop_catalog: Catalog, tmp_path: Path) -> None:
    import json

    t = hadoop_catalog.create_table("db.t", SCHEMA, format_version=3)
    doc = json.loads(Path(t.metadata_location.removeprefix("file://")).read_text())
    types = [f["type"] for f in doc["schemas"][0]["fields"]]
    assert types == ["long", "timestamp_ns", "timestamptz_ns", "unknown"]
    assert pyiceberg_table(t.metadata_location).schema().find_type("u").__class__.__name__ == (
        "UnknownType"
    )


@pytest.mark.parametrize("type_name", ["variant", "geometry(srid:4326)", "geography"])
def test_variant_and_geospatial_columns_are_refused_naming_the_column_and_type(
    type_name: str,
) -> None:
    from stream_sink.exceptions import UnsupportedTypeError
    from stream_sink.table.types import field_from_json

    inner = {"id": 3, "name": "shape", "required": False, "type": type_name}
    outer = {
        "id": 2,
        "name": "place",
        "required": False,
        "type": {"type": "struct", "fields": [inner]},
    }
    with pytest.raises(UnsupportedTypeError) as e:
        field_from_json(outer)
    assert str(e.value).startswith(
        f"column 'place.shape' has type {type_name} (Iceberg format version 3), which "
        "stream_sink does not support"
    )

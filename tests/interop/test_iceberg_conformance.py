"""Conformance: Iceberg tables of the shapes other writers produce, written here by those
writers, read by our scan equal to DuckDB, pyiceberg and Java Iceberg; broken or
unsupported tables refused with an error naming the problem.

Shapes (each built in the module fixture, read by Java in one JVM):

- ``imported``: Parquet files without field ids added with pyiceberg's ``add_files``
  (a name mapping; nested struct, list and map; files with different column orders);
- ``partial_mapping``: the same, with a mapping that leaves a column out and lists no
  name for a struct child: those read as null everywhere;
- ``defaults``: columns pyiceberg added with ``initial-default`` (int, string, date,
  decimal, and inside a struct): rows of older files read the defaults;
- ``java_v1``: a format version 1 table written by Java (partitioned, a copy-on-write
  delete, a rename and an added column);
- ``v1_embedded``: that table with its snapshots' manifests listed in the metadata
  itself (how v1 writers before manifest lists wrote them; no writer here writes it,
  so the metadata is rewritten from the Java table);
- ``renamed``: an ``add_files`` table whose column we rename and extend (the name
  mapping follows the change, so the old files still read);
- ``sink``: an ``add_files`` table we append to and upsert into with the sink's
  writers, convert equality deletes in, and compact (rewritten files get field ids).

Readers that cannot read a shape are listed in ``REFUSED`` (checked to fail), those
known to read one wrongly in ``WRONG`` (checked to differ), so a reader that changes
shows up here.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from readers import canonical_rows, duckdb_rows

import stream_sink as ss
from stream_sink.exceptions import (
    CorruptMetadataError,
    SchemaMismatchError,
    UnsupportedError,
    UnsupportedSchemeError,
)
from stream_sink.table.arrow import FIELD_ID_KEY
from stream_sink.table.catalog import Catalog
from stream_sink.table.manifest_list import read_manifest_list
from stream_sink.table.name_mapping import NAME_MAPPING_PROPERTY
from stream_sink.table.schema import Schema

pyiceberg_sql = pytest.importorskip("pyiceberg.catalog.sql")
from pyiceberg.schema import Schema as PySchema  # noqa: E402
from pyiceberg.types import (  # noqa: E402
    BooleanType,
    DateType,
    DecimalType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
)

PY_SCHEMA = PySchema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType()),
    NestedField(
        3,
        "profile",
        StructType(
            NestedField(4, "email", StringType()), NestedField(5, "verified", BooleanType())
        ),
    ),
    NestedField(6, "tags", ListType(7, StringType(), element_required=False)),
    NestedField(8, "attrs", MapType(9, StringType(), 10, LongType(), value_required=False)),
    identifier_field_ids=[1],
)
ARROW = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("profile", pa.struct([("email", pa.string()), ("verified", pa.bool_())])),
        pa.field("tags", pa.list_(pa.field("element", pa.string()))),
        pa.field("attrs", pa.map_(pa.string(), pa.int64())),
    ]
)
JAVA_SQL = [
    "CREATE TABLE hc.db.v1 (id bigint, name string, p string) USING iceberg "
    "PARTITIONED BY (p) TBLPROPERTIES ('format-version'='1')",
    "INSERT INTO hc.db.v1 VALUES (1, 'a', 'x'), (2, 'b', 'y'), (3, 'c', 'x')",
    "INSERT INTO hc.db.v1 VALUES (4, 'd', 'y')",
    "DELETE FROM hc.db.v1 WHERE id = 2",
    "ALTER TABLE hc.db.v1 RENAME COLUMN name TO label",
    "ALTER TABLE hc.db.v1 ADD COLUMN extra int",
    "INSERT INTO hc.db.v1 VALUES (5, 'e', 'x', 50)",
    "CREATE TABLE hc.db.v3 (id bigint) USING iceberg TBLPROPERTIES ('format-version'='3')",
    "INSERT INTO hc.db.v3 VALUES (1)",
]


def imported_rows(start: int, n: int, reverse: bool = False) -> pa.Table:
    ids = range(start, start + n)
    data = pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "name": [f"n{i}" if i % 3 else None for i in ids],
            "profile": [{"email": f"{i}@x", "verified": i % 2 == 0} for i in ids],
            "tags": [[f"t{i}"] * (i % 3) for i in ids],
            "attrs": [[("k", i)] if i % 2 else [] for i in ids],
        },
        schema=ARROW,
    )
    if reverse:  # a file whose columns come in another order: names decide, not positions
        data = data.select(list(reversed(data.column_names)))
    return data


def write_files(directory: Path, *tables: pa.Table) -> list[str]:
    """Parquet files without field ids (pyarrow writes none unless the schema has them)."""
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for i, t in enumerate(tables):
        path = directory / f"part-{i}.parquet"
        pq.write_table(t, path)
        out.append(f"file://{path}")
    return out


@dataclass
class Built:
    """The shapes: our handles by name, and what the writes recorded."""

    py: Any
    ours: Catalog
    hadoop: Catalog
    locations: dict[str, str]  # shape -> metadata file (what DuckDB and Java read)
    notes: dict[str, Any]

    def table(self, shape: str) -> Any:
        if shape in ("java_v1", "v1_embedded"):
            return self.hadoop.load_table("db.v1")
        return self.ours.load_table(f"db.{shape}")


def add_files_table(py: Any, root: Path, name: str) -> Any:
    table = py.create_table(f"db.{name}", PY_SCHEMA)
    files = write_files(
        root / "imported" / name, imported_rows(0, 4), imported_rows(4, 3, reverse=True)
    )
    table.add_files(files)
    return py.load_table(f"db.{name}")


def build_partial_mapping(py: Any, root: Path) -> None:
    """The mapping pyiceberg wrote, less column ``name``, and with no name for
    ``profile.verified`` (ids as pyiceberg assigned them when it created the table)."""
    table = add_files_table(py, root, "partial_mapping")
    mapping = json.loads(table.properties[NAME_MAPPING_PROPERTY])
    mapping = [m for m in mapping if m["names"] != ["name"]]
    profile = next(m for m in mapping if m["names"] == ["profile"])
    next(f for f in profile["fields"] if f["names"] == ["verified"])["names"] = []
    with table.transaction() as tx:
        tx.set_properties({NAME_MAPPING_PROPERTY: json.dumps(mapping)})


def build_defaults(py: Any) -> None:
    schema = PySchema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "s", StructType(NestedField(3, "a", IntegerType()))),
    )
    table = py.create_table("db.defaults", schema)
    old = pa.table(
        {"id": pa.array([1, 2], pa.int64()), "s": [{"a": 1}, None]},
        schema=pa.schema(
            [pa.field("id", pa.int64(), False), ("s", pa.struct([("a", pa.int32())]))]
        ),
    )
    table.append(old)
    with table.update_schema() as u:
        u.add_column("n", IntegerType(), default_value=7)
        u.add_column("label", StringType(), default_value="none")
        u.add_column("day", DateType(), default_value=dt.date(2024, 1, 2))
        u.add_column("amount", DecimalType(9, 2), default_value=Decimal("1.50"))
        u.add_column(("s", "b"), LongType(), default_value=42)
    table = py.load_table("db.defaults")
    table.append(
        pa.Table.from_pylist(
            [{"id": 3, "s": {"a": 3, "b": 30}, "n": 8, "label": None, "day": None, "amount": None}],
            schema=table.schema().as_arrow(),
        )
    )


def build_renamed(py: Any, ours: Catalog, root: Path) -> None:
    add_files_table(py, root, "renamed")
    table = ours.load_table("db.renamed")
    with table.update_schema() as u:
        u.rename_column("name", "label")
        u.add_column("note", "string")
    table = ours.load_table("db.renamed")
    more = imported_rows(7, 2).rename_columns(["id", "label", "profile", "tags", "attrs"])
    table.append(more.append_column("note", pa.array(["new", None])))


def build_sink(py: Any, ours: Catalog, root: Path, notes: dict[str, Any]) -> None:
    """The sink's writers (``append``/``upsert``) on an ``add_files`` table, then the
    maintenance that reads its files through the mapping: conversion and compaction."""
    add_files_table(py, root, "sink")
    table = ours.load_table("db.sink")
    table.append(imported_rows(7, 2))
    upserted = imported_rows(2, 7).set_column(1, "name", pa.array([f"u{i}" for i in range(7)]))
    table.upsert(upserted.slice(0, 2))  # keys 2 and 3: rows of the first imported file
    table.upsert(upserted.slice(5, 2))  # keys 7 and 8: rows we appended
    table.maintenance.convert_equality_deletes()
    notes["converted"] = table.refresh().current_snapshot().snapshot_id
    table.maintenance.rewrite_data_files(min_input_files=1)
    table.maintenance.remove_dangling_deletes()
    table.refresh()
    files = [t.data_file.file_path for t in table.scan().plan_files()]
    notes["compacted_files_have_ids"] = [has_field_ids(table.io, f) for f in files]


def has_field_ids(io: Any, location: str) -> bool:
    with io.open_input(location) as f:
        schema = pq.read_schema(f)
    return all(FIELD_ID_KEY in (field.metadata or {}) for field in schema)


def embed_manifests(hadoop_root: Path, root: Path) -> str:
    """A copy of the Java v1 table's newest metadata with every snapshot's manifests
    listed in the metadata itself (``manifests``) instead of a manifest list."""
    meta_dir = hadoop_root / "db" / "v1" / "metadata"
    newest = max(meta_dir.glob("v*.metadata.json"), key=lambda p: int(p.name[1:].split(".")[0]))
    doc = json.loads(newest.read_text())
    io = ss.load_catalog("x", type="hadoop", warehouse=str(hadoop_root)).io_for(str(meta_dir))
    for snap in doc["snapshots"]:
        snap["manifests"] = [
            m.manifest_path for m in read_manifest_list(io, snap.pop("manifest-list"))
        ]
    out = root / "v1_embedded.metadata.json"
    out.write_text(json.dumps(doc))
    return str(out)


def broken_copy(hadoop_root: Path, table: str, name: str, edit: Any) -> None:
    """A copy of Java table ``table`` as ``db.name``, its newest metadata edited."""
    src, dst = hadoop_root / "db" / table, hadoop_root / "db" / name
    shutil.copytree(src, dst)
    hint = (dst / "metadata" / "version-hint.text").read_text().strip()
    meta = dst / "metadata" / f"v{hint}.metadata.json"
    doc = json.loads(meta.read_text())
    edit(doc)
    meta.write_text(json.dumps(doc))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, java_sql: Any) -> Any:
    b = build(tmp_path_factory.mktemp("conformance"), java_sql)
    yield b
    b.ours.close()
    b.hadoop.close()
    b.py.engine.dispose()


def build(root: Path, java_sql: Any) -> Built:
    """Every shape under ``root``: Java's tables first (one JVM), then the others."""
    hadoop_root = root / "java"
    java_sql(str(hadoop_root), JAVA_SQL)
    uri = f"sqlite:///{root}/catalog.db"
    py = pyiceberg_sql.SqlCatalog("conf", uri=uri, warehouse=f"file://{root / 'py'}")
    py.create_namespace("db")
    ours = ss.load_catalog("conf", type="sql", uri=uri, warehouse=str(root / "py"))
    hadoop = ss.load_catalog("hc", type="hadoop", warehouse=str(hadoop_root))
    notes: dict[str, Any] = {}
    add_files_table(py, root, "imported")
    build_partial_mapping(py, root)
    build_defaults(py)
    build_renamed(py, ours, root)
    build_sink(py, ours, root, notes)
    no_mapping = add_files_table(py, root, "no_mapping")
    with no_mapping.transaction() as tx:
        tx.remove_properties(NAME_MAPPING_PROPERTY)
    bad_mapping = add_files_table(py, root, "bad_mapping")
    with bad_mapping.transaction() as tx:
        tx.set_properties({NAME_MAPPING_PROPERTY: '{"names": ["id"]}'})
    broken_copy(hadoop_root, "v1", "future", lambda d: d.update({"format-version": 9}))
    broken_copy(hadoop_root, "v1", "on_gcs", lambda d: d.update({"location": "gs://bucket/v1"}))
    locations = {
        name: ours.load_table(f"db.{name}").metadata_location
        for name in ("imported", "partial_mapping", "defaults", "renamed", "sink")
    }
    locations["java_v1"] = hadoop.load_table("db.v1").metadata_location
    locations["v1_embedded"] = embed_manifests(hadoop_root, root)
    notes["v3"] = str(hadoop_root / "db" / "v3")
    return Built(py, ours, hadoop, locations, notes)


@pytest.fixture(scope="module")
def java_rows(built: Built, java_read: Any) -> dict[str, Any]:
    """Every readable shape (and the v3 table Java wrote) read by
    Java in one JVM; a shape Java refuses maps to None."""
    names = [n for n in built.locations if n != "defaults"]
    locations = [built.locations[n] for n in names]
    locations += [built.locations["sink"] + f"@{built.notes['converted']}", built.notes["v3"]]
    read = java_read(locations)
    return {n: t.to_pylist() for n, t in zip([*names, "sink@converted", "v3"], read, strict=True)}


SHAPES = ["imported", "partial_mapping", "defaults", "java_v1", "v1_embedded", "renamed", "sink"]


def our_rows(built: Built, shape: str, snapshot_id: int | None = None) -> list[dict[str, Any]]:
    if shape == "v1_embedded":
        table = built.hadoop.load_table("db.v1")
        meta = built.hadoop.read_metadata(built.locations["v1_embedded"])
        assert all(s.manifests and not s.manifest_list for s in meta.snapshots)
        table = type(table)(table.identifier, meta, built.locations[shape], table.io, table.catalog)
    else:
        table = built.table(shape)
    return table.scan(snapshot_id=snapshot_id).to_arrow().to_pylist()  # type: ignore[no-any-return]


def schema_of(built: Built, shape: str) -> Schema:
    return built.table("java_v1" if shape == "v1_embedded" else shape).schema()  # type: ignore[no-any-return]


def test_name_mapped_imports_read_every_column_at_every_level(built: Built) -> None:
    rows = {r["id"]: r for r in our_rows(built, "imported")}
    assert sorted(rows) == list(range(7))
    assert rows[5] == {
        "id": 5,
        "name": "n5",
        "profile": {"email": "5@x", "verified": False},
        "tags": ["t5", "t5"],
        "attrs": [("k", 5)],
    }


def test_columns_a_mapping_leaves_out_read_as_null(built: Built) -> None:
    rows = our_rows(built, "partial_mapping")
    assert {r["name"] for r in rows} == {None}
    assert {r["profile"]["verified"] for r in rows} == {None}
    assert {r["profile"]["email"] for r in rows} == {f"{i}@x" for i in range(7)}


def test_columns_added_with_defaults_read_them_in_older_rows(built: Built) -> None:
    rows = sorted(our_rows(built, "defaults"), key=lambda r: r["id"])
    assert rows == [
        {"id": 1, "s": {"a": 1, "b": 42}, "n": 7, "label": "none",
         "day": dt.date(2024, 1, 2), "amount": Decimal("1.50")},
        {"id": 2, "s": None, "n": 7, "label": "none",
         "day": dt.date(2024, 1, 2), "amount": Decimal("1.50")},
        {"id": 3, "s": {"a": 3, "b": 30}, "n": 8, "label": None, "day": None, "amount": None},
    ]  # fmt: skip


def test_java_v1_tables_read_with_and_without_manifest_lists(built: Built) -> None:
    want = [
        {"id": 1, "label": "a", "p": "x", "extra": None},
        {"id": 3, "label": "c", "p": "x", "extra": None},
        {"id": 4, "label": "d", "p": "y", "extra": None},
        {"id": 5, "label": "e", "p": "x", "extra": 50},
    ]
    for shape in ("java_v1", "v1_embedded"):
        assert sorted(our_rows(built, shape), key=lambda r: r["id"]) == want, shape


def test_renaming_and_adding_columns_keeps_mapped_files_readable(built: Built) -> None:
    rows = {r["id"]: r for r in our_rows(built, "renamed")}
    assert (rows[1]["label"], rows[1]["note"]) == ("n1", None)
    assert (rows[7]["label"], rows[7]["note"]) == ("n7", "new")
    mapping = json.loads(built.table("renamed").properties[NAME_MAPPING_PROPERTY])
    assert mapping[1] == {"names": ["name", "label"], "field-id": 2}
    assert mapping[-1]["names"] == ["note"]


def test_the_sink_appends_and_upserts_into_an_imported_table(built: Built) -> None:
    rows = {r["id"]: r["name"] for r in our_rows(built, "sink")}
    assert rows == {0: None, 1: "n1", 2: "u0", 3: "u1", 4: "n4", 5: "n5", 6: None,
                    7: "u5", 8: "u6"}  # fmt: skip
    assert our_rows(built, "sink", built.notes["converted"]) == our_rows(built, "sink")
    assert built.notes["compacted_files_have_ids"] and all(built.notes["compacted_files_have_ids"])


#: Readers that refuse a shape (checked: they raise, rather than give other rows).
#: pyiceberg 0.12: no embedded manifests, and a file column a mapping does not list
#: raises "Could not find field with name"; DuckDB 1.5.5: no embedded manifests; Java:
#: ``initial-default`` needs format version 3 (pyiceberg writes it into v2 tables).
REFUSED = {"partial_mapping": {"pyiceberg"}, "v1_embedded": {"pyiceberg", "DuckDB"}}
#: Readers known to give other rows (checked to differ; the shape's own test states
#: what is right, and Java agrees): DuckDB 1.5.5 matches the columns of a file a
#: mapping leaves a column out of by position (nulls, or values under other columns).
WRONG = {"partial_mapping": {"DuckDB"}}


@pytest.mark.parametrize("shape", SHAPES)
def test_every_reader_reads_the_same_rows(
    built: Built, java_rows: dict[str, Any], shape: str
) -> None:
    schema = schema_of(built, shape)
    ours = canonical_rows(our_rows(built, shape), schema)
    location = built.locations[shape]
    readers = {
        "pyiceberg": lambda: py_rows(location),
        "DuckDB": lambda: duckdb_rows(location.removeprefix("file://")),
    }
    for name, read in readers.items():
        if name in REFUSED.get(shape, ()):
            with pytest.raises(Exception):  # noqa: B017 (the reader's own error types)
                read()
        elif name in WRONG.get(shape, ()):
            got = read()
            lost_keys = any(r["id"] is None for r in got)  # values under other columns
            assert lost_keys or canonical_rows(got, schema) != ours, f"{name} reads it now"
        else:
            assert canonical_rows(read(), schema) == ours, name
    if shape != "defaults":
        assert canonical_rows(java_rows[shape], schema) == ours, "Java"
    if shape == "sink":  # before compaction: position deletes on a file without ids
        at = built.notes["converted"]
        ours_then = canonical_rows(our_rows(built, shape, at), schema)
        assert canonical_rows(java_rows["sink@converted"], schema) == ours_then, "Java"
        assert canonical_rows(py_rows(location, at), schema) == ours_then, "pyiceberg"


def py_rows(location: str, snapshot_id: int | None = None) -> list[dict[str, Any]]:
    from pyiceberg.table import StaticTable

    scan = StaticTable.from_metadata(location).scan(snapshot_id=snapshot_id)
    return scan.to_arrow().to_pylist()  # type: ignore[no-any-return]


def test_a_file_without_ids_in_a_table_without_mapping_is_refused_like_pyiceberg(
    built: Built,
) -> None:
    with pytest.raises(SchemaMismatchError, match=r"part-0\.parquet has no field ids") as e:
        our_rows(built, "no_mapping")
    assert NAME_MAPPING_PROPERTY in str(e.value)
    location = built.ours.load_table("db.no_mapping").metadata_location
    with pytest.raises(Exception, match="field-id"):
        py_rows(location)


def test_a_malformed_mapping_is_refused_naming_the_property(built: Built) -> None:
    with pytest.raises(CorruptMetadataError, match=NAME_MAPPING_PROPERTY):
        our_rows(built, "bad_mapping")


def test_format_version_3_is_read_and_future_versions_are_unsupported_not_damage(
    built: Built, java_rows: Any
) -> None:
    with pytest.raises(UnsupportedError, match="format version 9 is newer") as e:
        built.hadoop.load_table("db.future")
    assert "recover" not in str(e.value), "no rollback advice for a table that is fine"
    v3 = built.hadoop.load_table("db.v3")
    assert v3.format_version == 3
    assert v3.scan().to_arrow().to_pylist() == java_rows["v3"] == [{"id": 1}]


def test_a_table_on_a_store_without_fileio_is_refused_naming_the_scheme(built: Built) -> None:
    with pytest.raises(UnsupportedSchemeError, match=r"gs:// scheme is not supported.*FileIO"):
        built.hadoop.load_table("db.on_gcs").scan().to_arrow()

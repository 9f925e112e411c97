"""Catalog behaviour every catalog shares (hadoop, sqlite, postgres), then the SQL
catalog's own: the Iceberg JDBC schema, file naming, pyiceberg interop, and how a
commit settles when the database fails.

Tests stream_sink.table.catalog.base: the contract every catalog shares.
Tests stream_sink.table.catalog.purge: what a purging drop deletes."""

from __future__ import annotations

import re
import sqlite3
import threading
import time
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

import stream_sink
from stream_sink.exceptions import (
    CommitFailedError,
    CommitStateUnknownError,
    CorruptMetadataError,
    InvalidOptionError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
    ValidationError,
)
from stream_sink.table.catalog import Catalog, SqlCatalog
from stream_sink.table.catalog.sql import engine_url
from stream_sink.table.schema import Schema
from stream_sink.table.types import LongType, NestedField, StringType

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType()),
)


def set_property(cat: Catalog, name: str, key: str, value: str) -> str:
    table = cat.load_table(name)
    new = table.metadata.with_properties({key: value})
    return cat.commit(table.identifier, table.metadata_location, new, base_metadata=table.metadata)


def metadata_files(location: str) -> list[str]:
    return sorted(p.name for p in Path(location, "metadata").iterdir())


# --- every catalog ----------------------------------------------------------------------


def test_create_then_load_gives_the_same_table(catalog: Catalog) -> None:
    catalog.create_namespace("db")
    created = catalog.create_table(
        "db.events", SCHEMA, identifier_fields=["id"], properties={"owner": "me"}
    )
    loaded = catalog.load_table("db.events")

    assert loaded.metadata_location == created.metadata_location
    assert loaded.schema().fields == SCHEMA.fields
    assert loaded.schema().identifier_field_names == ["id"]
    assert loaded.properties["owner"] == "me"
    assert loaded.location == catalog.default_table_location(("db", "events"))
    assert loaded.location.endswith("/warehouse/db/events")
    assert catalog.table_exists("db.events") and not catalog.table_exists("db.other")


def test_create_errors(catalog: Catalog) -> None:
    with pytest.raises(NoSuchNamespaceError, match="nope"):
        catalog.create_table("nope.t", SCHEMA)
    catalog.create_namespace("db")
    catalog.create_table("db.t", SCHEMA)
    with pytest.raises(TableAlreadyExistsError, match=r"db\.t"):
        catalog.create_table("db.t", SCHEMA)
    with pytest.raises(NoSuchTableError, match=r"db\.missing"):
        catalog.load_table("db.missing")
    with pytest.raises(ValidationError, match="namespace"):
        catalog.create_table("lonely", SCHEMA)


def test_namespaces_nest_and_list_direct_children(catalog: Catalog) -> None:
    catalog.create_namespace("a")
    catalog.create_namespace(("a", "b"))
    catalog.create_namespace("z")
    catalog.create_table("a.t1", SCHEMA)
    catalog.create_table("a.b.t2", SCHEMA)

    assert catalog.list_namespaces() == [("a",), ("z",)]
    assert catalog.list_namespaces("a") == [("a", "b")]
    assert catalog.list_tables("a") == [("a", "t1")]
    assert catalog.list_tables("a.b") == [("a", "b", "t2")]
    assert catalog.list_tables("z") == []
    assert catalog.namespace_exists("a.b") and not catalog.namespace_exists("a.t1")
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_tables("missing")
    with pytest.raises(NamespaceAlreadyExistsError):
        catalog.create_namespace("a")


def test_drop_namespace_only_when_empty(catalog: Catalog) -> None:
    catalog.create_namespace("db")
    catalog.create_table("db.t", SCHEMA)
    with pytest.raises(NamespaceNotEmptyError, match="db"):
        catalog.drop_namespace("db")
    catalog.drop_table("db.t")
    catalog.drop_namespace("db")
    assert not catalog.namespace_exists("db")
    with pytest.raises(NoSuchNamespaceError):
        catalog.drop_namespace("db")


def test_drop_table(catalog: Catalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    catalog.drop_table("db.t", purge=True)
    assert not catalog.table_exists("db.t")
    assert catalog.list_tables("db") == []
    assert not Path(table.metadata_location).exists()
    with pytest.raises(NoSuchTableError):
        catalog.load_table("db.t")
    with pytest.raises(NoSuchTableError):
        catalog.drop_table("db.t")
    catalog.create_table("db.t", SCHEMA)  # the name is free again


def test_stale_commit_fails_and_leaves_the_table_unchanged(catalog: Catalog) -> None:
    catalog.create_namespace("db")
    catalog.create_table("db.t", SCHEMA)
    first, second = catalog.load_table("db.t"), catalog.load_table("db.t")
    winner = catalog.commit(
        first.identifier, first.metadata_location, first.metadata.with_properties({"w": "1"})
    )
    files_before = metadata_files(first.location)

    with pytest.raises(CommitFailedError, match=r"db\.t"):
        catalog.commit(
            second.identifier,
            second.metadata_location,
            second.metadata.with_properties({"loser": "1"}),
        )

    now = catalog.load_table("db.t")
    assert now.metadata_location == winner
    assert now.properties.get("w") == "1" and "loser" not in now.properties
    assert metadata_files(first.location) == files_before  # nothing left behind


def test_every_commit_is_logged_once(catalog: Catalog) -> None:
    catalog.create_namespace("db")
    created = catalog.create_table("db.t", SCHEMA)
    locations = [created.metadata_location]
    for i in range(3):
        locations.append(set_property(catalog, "db.t", f"k{i}", str(i)))

    table = catalog.load_table("db.t")
    assert table.metadata_location == locations[-1]
    assert [e.value for e in table.metadata.metadata_log] == locations[:-1]
    assert {f"k{i}" for i in range(3)} <= set(table.properties)


def test_old_metadata_deleted_after_commit_when_asked(catalog: Catalog) -> None:
    catalog.create_namespace("db")
    catalog.create_table(
        "db.t",
        SCHEMA,
        properties={
            "write.metadata.delete-after-commit.enabled": "true",
            "write.metadata.previous-versions-max": "2",
        },
    )
    for i in range(4):
        set_property(catalog, "db.t", "k", str(i))

    table = catalog.load_table("db.t")
    kept = [str(e.value) for e in table.metadata.metadata_log] + [table.metadata_location]
    assert len(kept) == 3
    on_disk = [f for f in metadata_files(table.location) if f.endswith(".metadata.json")]
    assert sorted(on_disk) == sorted(Path(k).name for k in kept)


def test_gzip_metadata_is_written_and_read(catalog: Catalog) -> None:
    catalog.create_namespace("db")
    catalog.create_table("db.t", SCHEMA, properties={"write.metadata.compression-codec": "gzip"})
    location = set_property(catalog, "db.t", "k", "v")
    assert location.endswith(".gz.metadata.json")
    assert Path(location).read_bytes()[:2] == b"\x1f\x8b"
    assert catalog.load_table("db.t").properties["k"] == "v"


def test_corrupt_metadata_names_table_and_file(catalog: Catalog) -> None:
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    data = Path(table.metadata_location).read_bytes()
    Path(table.metadata_location).write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptMetadataError) as err:
        catalog.load_table("db.t")
    assert "db.t" in str(err.value) and table.metadata_location in str(err.value)


def test_format_version_1_tables(catalog: Catalog) -> None:
    catalog.create_namespace("db")
    catalog.create_table("db.t", SCHEMA, format_version=1)
    set_property(catalog, "db.t", "k", "v")
    assert catalog.load_table("db.t").format_version == 1


# --- SQL catalogs (sqlite, postgres) -------------------------------------------------------

SQL_KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture
def sql_catalog(catalog: Catalog) -> SqlCatalog:
    assert isinstance(catalog, SqlCatalog)
    return catalog


sql_kinds = pytest.mark.parametrize("catalog", SQL_KINDS, indirect=True)


@sql_kinds
def test_rename_table(sql_catalog: SqlCatalog) -> None:
    sql_catalog.create_namespace("db")
    sql_catalog.create_namespace("other")
    table = sql_catalog.create_table("db.t", SCHEMA)
    sql_catalog.create_table("db.taken", SCHEMA)

    with pytest.raises(TableAlreadyExistsError):
        sql_catalog.rename_table("db.t", "db.taken")
    with pytest.raises(NoSuchNamespaceError):
        sql_catalog.rename_table("db.t", "missing.t")
    with pytest.raises(NoSuchTableError):
        sql_catalog.rename_table("db.ghost", "db.t2")

    sql_catalog.rename_table("db.t", "other.renamed")
    assert sql_catalog.load_table("other.renamed").metadata_location == table.metadata_location
    assert not sql_catalog.table_exists("db.t")
    set_property(sql_catalog, "other.renamed", "k", "v")  # commits follow the new name


@sql_kinds
def test_schema_is_the_iceberg_jdbc_schema(sql_catalog: SqlCatalog) -> None:
    insp = inspect(sql_catalog.engine)
    tables = {c["name"]: c for c in insp.get_columns("iceberg_tables")}
    assert list(tables) == [
        "catalog_name",
        "table_namespace",
        "table_name",
        "metadata_location",
        "previous_metadata_location",
        "iceberg_type",
    ]
    lengths = {name: getattr(c["type"], "length", None) for name, c in tables.items()}
    assert lengths == {
        "catalog_name": 255,
        "table_namespace": 255,
        "table_name": 255,
        "metadata_location": 1000,
        "previous_metadata_location": 1000,
        "iceberg_type": 5,
    }
    assert insp.get_pk_constraint("iceberg_tables")["constrained_columns"] == [
        "catalog_name",
        "table_namespace",
        "table_name",
    ]
    props = {
        c["name"]: getattr(c["type"], "length", None)
        for c in insp.get_columns("iceberg_namespace_properties")
    }
    assert props == {
        "catalog_name": 255,
        "namespace": 255,
        "property_key": 255,
        "property_value": 1000,
    }
    assert insp.get_pk_constraint("iceberg_namespace_properties")["constrained_columns"] == [
        "catalog_name",
        "namespace",
        "property_key",
    ]


@sql_kinds
def test_rows_and_file_names_follow_java(sql_catalog: SqlCatalog) -> None:
    sql_catalog.create_namespace(("a", "b"), {"comment": "hello"})
    created = sql_catalog.create_table("a.b.t", SCHEMA)
    committed = set_property(sql_catalog, "a.b.t", "k", "v")

    assert re.fullmatch(
        r".*/warehouse/a/b/t/metadata/00000-[0-9a-f-]{36}\.metadata\.json",
        created.metadata_location,
    )
    assert re.fullmatch(r".*/metadata/00001-[0-9a-f-]{36}\.metadata\.json", committed)
    with sql_catalog.engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT table_namespace, table_name, metadata_location, "
                "previous_metadata_location, iceberg_type FROM iceberg_tables "
                "WHERE catalog_name = :c"
            ),
            {"c": sql_catalog.name},
        ).one()
        props = dict(
            conn.execute(
                text(
                    "SELECT property_key, property_value FROM iceberg_namespace_properties "
                    "WHERE catalog_name = :c AND namespace = 'a.b'"
                ),
                {"c": sql_catalog.name},
            ).all()
        )
    assert tuple(row) == ("a.b", "t", committed, created.metadata_location, "TABLE")
    assert props == {"exists": "true", "comment": "hello"}
    assert sql_catalog.load_namespace_properties("a.b") == props


@sql_kinds
def test_namespace_implied_by_a_table_row(sql_catalog: SqlCatalog) -> None:
    """Java (strict mode off) registers tables without namespace rows."""
    sql_catalog.create_namespace("db")
    table = sql_catalog.create_table("db.t", SCHEMA)
    with sql_catalog.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, "
                "metadata_location) VALUES (:c, 'java_ns.inner', 'jt', :m)"
            ),
            {"c": sql_catalog.name, "m": table.metadata_location},
        )
    assert sql_catalog.namespace_exists("java_ns") and sql_catalog.namespace_exists("java_ns.inner")
    assert not sql_catalog.namespace_exists("java")  # a prefix is not a parent
    assert ("java_ns",) in sql_catalog.list_namespaces()
    assert sql_catalog.list_tables("java_ns.inner") == [("java_ns", "inner", "jt")]


@sql_kinds
def test_catalog_names_are_isolated(sql_catalog: SqlCatalog, tmp_path: Path) -> None:
    sql_catalog.create_namespace("db")
    sql_catalog.create_table("db.t", SCHEMA)
    other = SqlCatalog("someone_else", sql_catalog.properties["uri"], str(tmp_path / "w2"))
    try:
        assert not other.namespace_exists("db")
        other.create_namespace("db")
        other.create_table("db.t", SCHEMA)
        assert other.current_metadata_location("db.t") != sql_catalog.current_metadata_location(
            "db.t"
        )
    finally:
        other.close()


def test_sqlite_lock_is_a_clean_commit_failure(tmp_path: Path) -> None:
    db = tmp_path / "catalog.db"
    cat = stream_sink.load_catalog(
        "c",
        type="sql",
        uri=f"sqlite:///{db}",
        warehouse=str(tmp_path / "wh"),
        **{"sqlite.busy-timeout-ms": "200"},
    )
    cat.create_namespace("db")
    table = cat.create_table("db.t", SCHEMA)
    files_before = metadata_files(table.location)
    blocker = sqlite3.connect(db)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(CommitFailedError, match=r"db\.t"):
            cat.commit(
                table.identifier,
                table.metadata_location,
                table.metadata.with_properties({"k": "v"}),
            )
    finally:
        blocker.rollback()
        blocker.close()
    assert cat.current_metadata_location("db.t") == table.metadata_location
    assert metadata_files(table.location) == files_before
    set_property(cat, "db.t", "k", "v")  # and a retry goes through


@pytest.mark.postgres
def test_postgres_connection_lost_mid_commit_is_unknown(postgres_url: str, tmp_path: Path) -> None:
    name = f"test_{uuid.uuid4().hex[:12]}"
    cat = stream_sink.load_catalog(
        name, type="sql", uri=postgres_url, warehouse=str(tmp_path / "wh")
    )
    admin = create_engine(engine_url(postgres_url), isolation_level="AUTOCOMMIT")
    trigger = f"slow_{name}"
    with admin.connect() as conn:
        conn.execute(
            text(
                f"CREATE FUNCTION {trigger}() RETURNS trigger AS $$ BEGIN PERFORM pg_sleep(30); "
                "RETURN NEW; END $$ LANGUAGE plpgsql"
            )
        )
        conn.execute(
            text(
                f"CREATE TRIGGER {trigger} BEFORE UPDATE ON iceberg_tables FOR EACH ROW "
                f"WHEN (NEW.catalog_name = '{name}') EXECUTE FUNCTION {trigger}()"
            )
        )

    def kill_the_committer() -> None:
        deadline = time.monotonic() + 20
        with admin.connect() as conn:
            while time.monotonic() < deadline:
                killed = conn.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE query LIKE 'UPDATE iceberg_tables%' AND pid <> pg_backend_pid()"
                    )
                ).all()
                if killed:
                    return
                time.sleep(0.1)

    try:
        cat.create_namespace("db")
        table = cat.create_table("db.t", SCHEMA)
        killer = threading.Thread(target=kill_the_committer)
        killer.start()
        with pytest.raises(CommitStateUnknownError, match=r"db\.t") as err:
            cat.commit(
                table.identifier,
                table.metadata_location,
                table.metadata.with_properties({"k": "v"}),
            )
        killer.join()
        kept = re.search(r"(\S+\.metadata\.json) is kept", str(err.value))
        assert kept and Path(kept.group(1)).exists()  # may be the table's state: never deleted
        assert cat.current_metadata_location("db.t") == table.metadata_location
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP TRIGGER IF EXISTS {trigger} ON iceberg_tables"))
            conn.execute(text(f"DROP FUNCTION IF EXISTS {trigger}()"))
        admin.dispose()
        cat.close()


def test_v0_schema_without_iceberg_type_still_works(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:
        conn.execute(
            "CREATE TABLE iceberg_tables(catalog_name VARCHAR(255) NOT NULL, "
            "table_namespace VARCHAR(255) NOT NULL, table_name VARCHAR(255) NOT NULL, "
            "metadata_location VARCHAR(1000), previous_metadata_location VARCHAR(1000), "
            "PRIMARY KEY (catalog_name, table_namespace, table_name))"
        )
    cat = stream_sink.load_catalog(
        "c", type="sql", uri=f"sqlite:///{db}", warehouse=str(tmp_path / "wh")
    )
    cat.create_namespace("db")
    cat.create_table("db.t", SCHEMA)
    set_property(cat, "db.t", "k", "v")
    assert cat.load_table("db.t").properties["k"] == "v"
    assert "iceberg_type" not in {
        c["name"]
        for c in inspect(cat.engine).get_columns(  # type: ignore[attr-defined]
            "iceberg_tables"
        )
    }


def test_uris() -> None:
    assert engine_url("postgresql://u@h:5/db").drivername == "postgresql+psycopg"
    assert (
        engine_url(
            "jdbc:postgresql://h/db", {"jdbc.user": "u", "jdbc.password": "p"}
        ).render_as_string(hide_password=False)
        == "postgresql+psycopg://u:p@h/db"
    )
    assert engine_url("jdbc:sqlite:/tmp/x.db").database == "/tmp/x.db"
    with pytest.raises(InvalidOptionError):
        stream_sink.load_catalog("c", type="sql")
    with pytest.raises(InvalidOptionError, match="unknown type"):
        stream_sink.load_catalog("c", type="hive", uri="thrift://x")


def test_sql_catalog_without_warehouse_needs_a_location(tmp_path: Path) -> None:
    cat = stream_sink.load_catalog("c", type="sql", uri=f"sqlite:///{tmp_path}/c.db")
    cat.create_namespace("db")
    with pytest.raises(InvalidOptionError, match="warehouse"):
        cat.create_table("db.t", SCHEMA)
    table = cat.create_table("db.t", SCHEMA, location=str(tmp_path / "somewhere"))
    assert cat.load_table("db.t").location == str(tmp_path / "somewhere")
    assert table.metadata_location.startswith(str(tmp_path / "somewhere" / "metadata"))


# --- pyiceberg's SqlCatalog on the same SQLite file ------------------------------------------


def pyiceberg_catalog(name: str, db: Path, warehouse: Path):  # type: ignore[no-untyped-def]
    from pyiceberg.catalog.sql import SqlCatalog as PyIcebergSqlCatalog

    return PyIcebergSqlCatalog(name, uri=f"sqlite:///{db}", warehouse=f"file://{warehouse}")


def test_pyiceberg_opens_our_table(tmp_path: Path) -> None:
    db, wh = tmp_path / "catalog.db", tmp_path / "wh"
    ours = stream_sink.load_catalog("shared", type="sql", uri=f"sqlite:///{db}", warehouse=str(wh))
    ours.create_namespace("db")
    ours.create_table("db.events", SCHEMA, identifier_fields=["id"])
    location = set_property(ours, "db.events", "from", "stream_sink")

    theirs = pyiceberg_catalog("shared", db, wh)
    table = theirs.load_table("db.events")
    assert table.metadata_location == location
    assert [(f.field_id, f.name, str(f.field_type), f.required) for f in table.schema().fields] == [
        (1, "id", "long", True),
        (2, "name", "string", False),
    ]
    assert table.schema().identifier_field_ids == [1]
    assert table.properties["from"] == "stream_sink"
    assert theirs.list_namespaces() == [("db",)]
    assert theirs.list_tables("db") == [("db", "events")]
    assert table.scan().to_arrow().num_rows == 0


def test_we_open_a_pyiceberg_table(tmp_path: Path) -> None:
    import pyarrow as pa

    db, wh = tmp_path / "catalog.db", tmp_path / "wh"
    theirs = pyiceberg_catalog("shared", db, wh)
    theirs.create_namespace("db")
    created = theirs.create_table(
        "db.made_by_pyiceberg",
        schema=pa.schema(
            [pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())]
        ),
    )
    created.append(
        pa.table(
            {"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]},
            schema=created.schema().as_arrow(),
        )
    )

    ours = stream_sink.load_catalog("shared", type="sql", uri=f"sqlite:///{db}", warehouse=str(wh))
    table = ours.load_table("db.made_by_pyiceberg")
    assert table.metadata_location == theirs.load_table("db.made_by_pyiceberg").metadata_location
    assert table.schema().column_names == ["id", "name"]
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary["added-records"] == "2"

    location = set_property(ours, "db.made_by_pyiceberg", "k", "v")
    again = theirs.load_table("db.made_by_pyiceberg")
    assert again.metadata_location == location and again.properties["k"] == "v"
    assert again.scan().to_arrow().num_rows == 2


def test_purge_removes_what_the_table_reaches_and_never_a_shared_data_path(
    tmp_path: Path,
) -> None:
    """Two tables write their data into one ``write.data.path``: purging one deletes its
    files and its own directories, and the other stays readable with every row."""
    import pyarrow as pa

    catalog = stream_sink.load_catalog(
        "c", type="sql", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=str(tmp_path / "wh")
    )
    catalog.create_namespace("db")
    shared = str(tmp_path / "shared-data")
    tables = {
        name: catalog.create_table(f"db.{name}", SCHEMA, properties={"write.data.path": shared})
        for name in ("a", "b")
    }
    tables["a"].append(pa.table({"id": [0, 10], "name": ["x", "y"]}))
    a_files = set(Path(shared).rglob("*.parquet"))
    tables["b"].append(pa.table({"id": [1, 11], "name": ["x", "y"]}))
    b_files = set(Path(shared).rglob("*.parquet")) - a_files
    location = tables["a"].location
    catalog.drop_table("db.a", purge=True)

    assert not Path(location).exists()
    assert a_files and not any(f.exists() for f in a_files)
    assert b_files and all(f.exists() for f in b_files)
    b = catalog.load_table("db.b")
    assert sorted(b.scan().to_arrow().column("id").to_pylist()) == [1, 11]

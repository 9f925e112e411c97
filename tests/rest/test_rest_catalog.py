"""The REST catalog against SeaweedFS's Iceberg REST server: namespaces, tables, commits
as updates with requirements, and the tables read back by pyiceberg and DuckDB through
the same catalog."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from stream_sink.catalogs import load_catalog
from stream_sink.exceptions import (
    CommitFailedError,
    NamespaceAlreadyExistsError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
    UnsupportedError,
)

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])


def rows(n: int, start: int = 0) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "name": [f"r{i}" for i in range(start, start + n)],
        },
        schema=SCHEMA,
    )


def test_namespaces(rest_catalog: Any) -> None:
    ns = rest_catalog.test_namespace
    assert rest_catalog.namespace_exists(ns)
    assert (ns,) in rest_catalog.list_namespaces()
    with pytest.raises(NamespaceAlreadyExistsError):
        rest_catalog.create_namespace(ns)
    assert not rest_catalog.namespace_exists(f"{ns}_absent")
    with pytest.raises(NoSuchNamespaceError):
        rest_catalog.list_tables(f"{ns}_absent")
    rest_catalog.create_namespace(f"{ns}_gone")
    rest_catalog.drop_namespace(f"{ns}_gone")
    assert not rest_catalog.namespace_exists(f"{ns}_gone")


def test_create_load_append_scan(rest_catalog: Any) -> None:
    name = f"{rest_catalog.test_namespace}.events"
    table = rest_catalog.create_table(name, SCHEMA, identifier_fields=["id"])
    assert table.location.startswith("s3://warehouse/")
    with pytest.raises(TableAlreadyExistsError):
        rest_catalog.create_table(name, SCHEMA)
    table.append(rows(5))
    table.append(rows(5, 5))
    loaded = rest_catalog.load_table(name)
    assert len(loaded.snapshots()) == 2
    assert sorted(loaded.scan().to_arrow().column("id").to_pylist()) == list(range(10))
    assert rest_catalog.list_tables(rest_catalog.test_namespace) == [tuple(name.split("."))]


def test_upsert_and_schema_evolution(rest_catalog: Any) -> None:
    name = f"{rest_catalog.test_namespace}.people"
    table = rest_catalog.create_table(name, SCHEMA, identifier_fields=["id"])
    table.append(rows(4))
    table.upsert(
        pa.table({"id": pa.array([1, 9], pa.int64()), "name": ["one", "nine"]}, schema=SCHEMA)
    )
    scanned = table.scan().to_arrow()
    got = dict(zip(scanned["id"].to_pylist(), scanned["name"].to_pylist(), strict=True))
    assert got == {0: "r0", 1: "one", 2: "r2", 3: "r3", 9: "nine"}
    table.update_schema().add_column("score", pa.float64()).commit()
    reloaded = rest_catalog.load_table(name)
    assert "score" in reloaded.schema().column_names
    assert reloaded.metadata.current_schema_id == 1


def test_a_stale_handle_loses_the_race_and_its_retry_lands(rest_catalog: Any) -> None:
    name = f"{rest_catalog.test_namespace}.race"
    rest_catalog.create_table(name, SCHEMA)
    a, b = rest_catalog.load_table(name), rest_catalog.load_table(name)
    a.append(rows(3))
    b.append(rows(3, 3))  # b's base is stale: 409 from the ref requirement, refresh, retry
    final = rest_catalog.load_table(name)
    assert len(final.snapshots()) == 2
    assert final.snapshots()[1].parent_snapshot_id == final.snapshots()[0].snapshot_id


def test_a_commit_on_a_stale_base_is_a_409(rest_catalog: Any) -> None:
    name = f"{rest_catalog.test_namespace}.stale"
    t = rest_catalog.create_table(name, SCHEMA)
    stale_location, stale = t.metadata_location, t.metadata
    t.append(rows(1))
    with pytest.raises(CommitFailedError, match="409"):
        rest_catalog.commit(
            t.identifier, stale_location, stale.with_properties({"k": "v"}), base_metadata=stale
        )


def test_rename_and_drop(rest_catalog: Any) -> None:
    ns = rest_catalog.test_namespace
    rest_catalog.create_table(f"{ns}.before", SCHEMA).append(rows(2))
    try:
        rest_catalog.rename_table(f"{ns}.before", f"{ns}.after")
    except Exception as e:  # not every server renames
        pytest.skip(f"the server does not rename tables: {e}")
    assert rest_catalog.table_exists(f"{ns}.after")
    assert not rest_catalog.table_exists(f"{ns}.before")
    rest_catalog.drop_table(f"{ns}.after")
    with pytest.raises(NoSuchTableError):
        rest_catalog.load_table(f"{ns}.after")


def test_pyiceberg_and_duckdb_read_through_the_same_catalog(
    rest_catalog: Any, seaweed: Any
) -> None:
    ns = rest_catalog.test_namespace
    table = rest_catalog.create_table(f"{ns}.shared", SCHEMA, identifier_fields=["id"])
    appended = table.append(rows(6)).snapshot_id
    table.upsert(pa.table({"id": pa.array([2], pa.int64()), "name": ["two"]}, schema=SCHEMA))

    from pyiceberg.catalog import load_catalog as py_load_catalog

    props = dict(seaweed.rest_props("warehouse"))
    props["client.access-key-id"] = seaweed.access_key
    props["client.secret-access-key"] = seaweed.secret_key
    # pyiceberg 0.12 reads no equality deletes: it reads the append's snapshot
    py_table = py_load_catalog("py", **props).load_table((ns, "shared"))
    assert py_table.metadata.current_snapshot_id == table.refresh().metadata.current_snapshot_id
    py = py_table.scan(snapshot_id=appended).to_arrow()
    assert sorted(py.column("id").to_pylist()) == list(range(6))

    from readers import _extension_file, duckdb_connection

    con = duckdb_connection()
    con.execute(f"LOAD '{_extension_file('duckdb_extension_httpfs')}'")
    endpoint = seaweed.s3_endpoint.removeprefix("http://")
    con.execute(
        f"CREATE SECRET s3 (TYPE s3, KEY_ID '{seaweed.access_key}', SECRET '{seaweed.secret_key}', "
        f"ENDPOINT '{endpoint}', URL_STYLE 'path', USE_SSL false, REGION 'us-east-1')"
    )
    con.execute(
        f"CREATE SECRET rest (TYPE iceberg, CLIENT_ID '{seaweed.access_key}', "
        f"CLIENT_SECRET '{seaweed.secret_key}', "
        f"OAUTH2_SERVER_URI '{seaweed.catalog_uri}/v1/oauth/tokens')"
    )
    con.execute(
        f"ATTACH 's3://warehouse' AS lake "
        f"(TYPE iceberg, ENDPOINT '{seaweed.catalog_uri}', SECRET rest)"
    )
    got = con.execute(f'SELECT id, name FROM lake."{ns}".shared ORDER BY id').fetchall()
    assert got == [(0, "r0"), (1, "r1"), (2, "two"), (3, "r3"), (4, "r4"), (5, "r5")]


def test_oauth_client_credentials(seaweed: Any) -> None:
    """pyiceberg's property names: credential=<id>:<secret> gets a bearer token, one per
    catalog open (the config request's token serves the catalog's requests), counted
    through a forwarding proxy in front of the server."""
    from counting_proxy import CountingProxy

    proxy = CountingProxy.start(seaweed.catalog_uri)
    try:
        catalog = load_catalog(
            "oauth",
            type="rest",
            uri=proxy.uri,
            warehouse="s3://warehouse",
            credential=f"{seaweed.access_key}:{seaweed.secret_key}",
            **seaweed.s3_props,
        )
        catalog.list_namespaces()
        catalog.list_namespaces()
        counts = proxy.counts()
    finally:
        proxy.stop()
    assert counts["config"] == 1 and counts["token"] == 1, counts
    assert counts["other"] == 2, counts


def test_maintenance_compacts_expires_and_removes_orphans_through_the_catalog(
    rest_catalog: Any, seaweed: Any
) -> None:
    import time

    from stream_sink.io import FileIO

    table = rest_catalog.create_table(f"{rest_catalog.test_namespace}.kept", SCHEMA)
    for start in (0, 3, 6):
        table.append(rows(3, start))
    orphan = f"{table.location}/data/orphan-00000.parquet"
    FileIO.for_location(orphan, seaweed.s3_props).write_bytes(orphan, b"not referenced")
    m = table.maintenance
    rewritten = m.rewrite_data_files(min_input_files=2)
    assert rewritten.rewritten_data_files == 3
    expired = m.expire_snapshots(older_than_ms=int(time.time() * 1000) + 1, retain_last=1)
    assert expired.expired_snapshots == 3 and expired.deleted_files > 3
    removed = m.remove_orphan_files(older_than_ms=int(time.time() * 1000) + 60_000)
    assert orphan in removed.orphans and removed.deleted >= 1
    final = rest_catalog.load_table(table.identifier)
    assert len(final.snapshots()) == 1
    with pytest.raises(UnsupportedError, match=r"stream-sink\.maintenance\.lock-location"):
        m.lock()  # no lock file where the table bucket takes none: the property is named
    assert sorted(final.scan().to_arrow()["id"].to_pylist()) == list(range(9))

"""Apache Iceberg Java changes the partition spec of tables that change streams write
(issue 26): ``ADD PARTITION FIELD bucket(4, id)`` and ``ADD COLUMN extra`` while the
stream is down, ``REPLACE PARTITION FIELD bucket(4, id) WITH bucket(8, id)`` while a
batch written under bucket(4) is in flight, then our own ``update_spec``, then Java's
``REPLACE PARTITION FIELD … WITH truncate(1000, id)`` while the stream is down again.
Every snapshot is read by Java and our reader, the current one by DuckDB where it can
read it, and the end by pyiceberg and DuckDB after conversion. Upsert and changelog
tables share the four JVM starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from readers import duckdb_rows, pyiceberg_rows
from spec_change_support import ChangeStream

import stream_sink as ss
from stream_sink.table.transforms import Bucket
from stream_sink.tables import IcebergTable

pytestmark = [pytest.mark.interop, pytest.mark.timeout(1800)]  # four JVM starts

MODES = ("upsert", "changelog", "partitioned")
"""``partitioned``: an upsert stream into a table created with bucket(4, id), which gets
an unpartitioned spec for its global deletes (Java reads that metadata too)."""
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def pairs(rows: list[dict[str, Any]]) -> list[tuple[Any, Any]]:
    return sorted((r["id"], r["v"]) for r in rows)


def test_change_streams_stay_exact_while_java_changes_the_spec(
    tmp_path: Path, java_sql: Any, java_read: Any
) -> None:
    warehouse = str(tmp_path / "wh")
    catalog = ss.load_catalog("specs", type="hadoop", warehouse=warehouse)
    catalog.create_namespace("db")
    tables: dict[str, IcebergTable] = {
        m: catalog.create_table(
            f"db.{m}",
            SCHEMA,
            [("bucket", "id", 4, "id_bucket_4")] if m == "partitioned" else None,
            identifier_fields=["id"],
        )
        for m in MODES
    }
    streams = {
        m: ChangeStream("upsert" if m == "partitioned" else m, seed=i) for i, m in enumerate(MODES)
    }

    def steps(n: int) -> None:
        for m in MODES:
            for _ in range(n):
                streams[m].step(tables[m].refresh())

    steps(2)
    java_sql(  # the stream is down
        warehouse,
        [
            stmt
            for m in MODES
            for stmt in (
                f"ALTER TABLE hc.db.{m} ADD PARTITION FIELD bucket(4, id)",
                f"ALTER TABLE hc.db.{m} ADD COLUMN extra string",
            )[(m == "partitioned") :]
        ],
    )
    steps(2)  # restarted
    in_flight = {m: streams[m].write(tables[m].refresh()) for m in MODES}
    java_sql(
        warehouse,
        [
            f"ALTER TABLE hc.db.{m} REPLACE PARTITION FIELD bucket(4, id) WITH bucket(8, id)"
            for m in MODES
        ],
    )
    for m in MODES:
        streams[m].commit(tables[m].refresh(), in_flight[m])
    steps(2)
    for m in MODES:
        t = tables[m].refresh()
        shape = [1, 1, 0] if m == "partitioned" else [0, 1, 1]  # ours added the global spec
        assert [len(s.fields) for s in t.metadata.partition_specs] == shape
        assert t.metadata.default_spec_id == (1 if m == "partitioned" else 2)
        with t.update_spec() as u:
            u.remove_field("id_bucket_8").add_field("id", Bucket(16), "id_bucket_16")
        if m != "partitioned":  # DuckDB 1.5.5 fails on that one until conversion
            assert pairs(duckdb_rows(t.metadata_location)) == pairs(streams[m].rows())
    steps(2)
    java_sql(  # the stream is down again
        warehouse,
        [
            f"ALTER TABLE hc.db.{m} REPLACE PARTITION FIELD id_bucket_16 WITH truncate(1000, id)"
            for m in MODES
        ],
    )
    steps(2)  # restarted

    locations = [
        f"{tables[m].refresh().metadata_location}@{snap}"
        for m in MODES
        for snap in streams[m].by_snapshot
    ]
    expected = [rows for m in MODES for rows in streams[m].by_snapshot.values()]
    for where, got, rows in zip(locations, java_read(locations), expected, strict=True):
        assert pairs(got.to_pylist()) == pairs(rows), f"Java at {where}"
    for m in MODES:
        t = tables[m].refresh()
        for snap, rows in streams[m].by_snapshot.items():
            assert pairs(t.scan(snapshot_id=snap).to_arrow().to_pylist()) == pairs(rows)
        t.maintenance.convert_equality_deletes()
        location = t.refresh().metadata_location
        final = pairs(streams[m].rows())
        assert pairs(pyiceberg_rows(location)) == final
        assert pairs(duckdb_rows(location)) == final
        assert pairs(t.scan().to_arrow().to_pylist()) == final

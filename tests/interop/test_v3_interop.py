"""Format version 3 against Apache Iceberg Java (1.10 on Spark 3.5), DuckDB and pyiceberg.

One JVM session does everything Java does here:
- it reads every snapshot of the v3 tables we write (append, upsert and changelog
  through the CDC writers, so deletion vectors beside equality deletes; after
  equality deletes became vectors; after compaction; a v2 table upgraded in place);
- it writes into one of ours (a merge-on-read DELETE: a vector merged with ours, and an
  append continuing our row ids);
- it writes a merge-on-read table of its own with DELETE, UPDATE and MERGE (deletion
  vectors), reading it back after each statement.
Ours then reads every one of those snapshots and must see what Java saw; DuckDB and
pyiceberg read the current snapshot of each of our tables."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from readers import duckdb_rows

from stream_sink.catalogs import load_catalog
from stream_sink.table.catalog import Catalog
from stream_sink.table.manifest import DataFileContent, FileFormat
from stream_sink.tables import IcebergTable
from stream_sink.write.snapshot import commit_write_result
from stream_sink.write.writer_factory import TaskWriterFactory

pytestmark = [pytest.mark.interop, pytest.mark.slow]

SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string()),
     pa.field("part", pa.int32(), nullable=False)]
)  # fmt: skip
Row = tuple[Any, ...]
V3 = {"format-version": "3"}
JAVA_TABLE = "hc.db.java_dv"
JAVA_STATEMENTS = [
    f"CREATE TABLE {JAVA_TABLE} (id bigint, v string, part int) USING iceberg "
    "PARTITIONED BY (part) TBLPROPERTIES ('format-version'='3', "
    "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
    "'write.merge.mode'='merge-on-read')",
    f"INSERT INTO {JAVA_TABLE} SELECT id, concat('n', id), cast(id % 2 AS int) FROM range(0, 30)",
    f"DELETE FROM {JAVA_TABLE} WHERE id % 5 = 0",
    f"UPDATE {JAVA_TABLE} SET v = 'upd' WHERE id % 3 = 0",
    f"DELETE FROM {JAVA_TABLE} WHERE id IN (7, 8)",  # a second vector, merged with the first
    f"MERGE INTO {JAVA_TABLE} t USING (SELECT id, 'm' AS v, cast(id % 2 AS int) AS part "
    "FROM range(25, 35)) s ON t.id = s.id WHEN MATCHED AND s.id = 26 THEN DELETE "
    "WHEN MATCHED THEN UPDATE SET t.v = s.v WHEN NOT MATCHED THEN INSERT *",
]


def rows(*items: Row) -> pa.Table:
    return pa.table(
        {"id": [r[0] for r in items], "v": [r[1] for r in items], "part": [r[2] for r in items]},
        SCHEMA,
    )


def changes(table: IcebergTable, items: Sequence[tuple[str, Row]], upsert: bool) -> None:
    """One row delta of ``items`` (row kind, row) through the CDC writers (key id)."""
    factory = TaskWriterFactory.for_table(table, equality_fields=["id"], upsert=upsert)
    writer = factory.create(0, 0)
    batch = rows(*[r for _, r in items]).append_column("_row_kind", pa.array([k for k, _ in items]))
    writer.write(batch)
    commit_write_result(table, writer.complete())


def canonical(records: Sequence[dict[str, Any]]) -> list[Row]:
    return sorted((r["id"], r["v"], r["part"]) for r in records)


@dataclass
class Built:
    catalog: Catalog
    warehouse: Path
    #: table name -> its snapshot ids, oldest first, when Java read them
    snapshots: dict[str, list[int]] = field(default_factory=dict)
    java: dict[str, list[Row]] = field(default_factory=dict)


def build_ours(catalog: Catalog) -> None:
    t = catalog.create_table("db.append3", SCHEMA, [("identity", "part")], properties=V3)
    t.append(rows((1, "a", 0), (2, "b", 1)))
    t.append(rows((3, "c", 0)))

    u = catalog.create_table("db.upsert3", SCHEMA, identifier_fields=["id"], properties=V3)
    u.append(rows(*[(i, f"v{i}", i % 2) for i in range(10)]))
    u.upsert(rows((1, "u1", 1), (11, "x", 1), (11, "y", 1), (12, "z", 0)))  # DV + eq deletes
    u.upsert(rows((11, "yy", 1), (2, "u2", 0)))

    c = catalog.create_table("db.changelog3", SCHEMA, identifier_fields=["id"], properties=V3)
    changes(c, [("+I", (i, f"v{i}", 0)) for i in range(6)], upsert=False)
    changes(c, [("-U", (1, "v1", 0)), ("+U", (1, "w1", 0)), ("-D", (2, "v2", 0)),
                ("+I", (6, "v6", 0)), ("-D", (6, "v6", 0)), ("+I", (7, "v7", 0))],
            upsert=False)  # fmt: skip

    for name in ("converted3", "compacted3"):
        x = catalog.create_table(f"db.{name}", SCHEMA, identifier_fields=["id"], properties=V3)
        for b in range(4):
            x.upsert(rows(*[(i, f"b{b}-{i}", i % 2) for i in range(b * 3, b * 3 + 8)]))
        x.maintenance.convert_equality_deletes()
        x.upsert(rows((0, "late", 0), (1, "late", 1)))
        x.maintenance.convert_equality_deletes()  # merges into existing vectors
        if name == "compacted3":
            x.maintenance.rewrite_data_files(min_input_files=1)

    g = catalog.create_table("db.upgraded", SCHEMA, identifier_fields=["id"])
    g.append(rows((1, "a", 0), (2, "b", 0)))
    g.upsert(rows((2, "B", 0), (2, "BB", 0)))  # a v2 position delete file
    g.upgrade_format_version(3)
    g.upsert(rows((1, "A", 0), (3, "c", 0), (3, "C", 0)))


WITH_EQUALITY_DELETES = {"upsert3", "changelog3", "upgraded"}
OURS = ["append3", "upsert3", "changelog3", "converted3", "compacted3", "upgraded"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, java_sql: Callable[..., Any]) -> Built:
    warehouse = tmp_path_factory.mktemp("v3") / "wh"
    catalog = load_catalog("v3", type="hadoop", warehouse=str(warehouse))
    catalog.create_namespace("db")
    build_ours(catalog)
    b = Built(catalog, warehouse)
    statements: list[str] = []
    keys: list[str] = []
    for name in OURS:
        ids = [s.snapshot_id for s in catalog.load_table(f"db.{name}").snapshots()]
        b.snapshots[name] = ids
        for sid in ids:
            statements.append(f"SELECT * FROM hc.db.{name} VERSION AS OF {sid}")
            keys.append(f"{name}@{sid}")
    # Java writes into one of ours: a merge-on-read delete (a vector for a file that
    # already has ours) and an append (row ids continue from ours)
    statements += [
        "ALTER TABLE hc.db.upsert3 SET TBLPROPERTIES ('write.delete.mode'='merge-on-read')",
        "DELETE FROM hc.db.upsert3 WHERE id IN (0, 11)",
        "INSERT INTO hc.db.upsert3 VALUES (40, 'java', 0)",
    ]
    keys += ["", "", ""]
    for stmt in JAVA_STATEMENTS:
        statements.append(stmt)
        keys.append("")
        if not stmt.startswith("CREATE"):
            statements.append(f"SELECT * FROM {JAVA_TABLE}")
            keys.append(f"java_dv#{len([k for k in keys if k.startswith('java_dv#')])}")
    got = java_sql(str(warehouse), statements)
    for key, table in zip(keys, got, strict=True):
        if key:
            assert table is not None
            b.java[key] = canonical(table.to_pylist())
    return b


@pytest.mark.parametrize("name", OURS)
def test_java_reads_every_snapshot_of_ours_as_we_do(built: Built, name: str) -> None:
    t = built.catalog.load_table(f"db.{name}")
    for sid in built.snapshots[name]:
        ours = canonical(t.scan(snapshot_id=sid).to_arrow().to_pylist())
        assert built.java[f"{name}@{sid}"] == ours, f"{name} snapshot {sid}"


@pytest.mark.parametrize("name", OURS)
def test_duckdb_and_pyiceberg_read_the_current_snapshot_as_we_do(built: Built, name: str) -> None:
    from pyiceberg.table import StaticTable

    t = built.catalog.load_table(f"db.{name}")
    if name == "upsert3":  # Java wrote into it since; its own test checks it
        t = t.refresh()
    ours = canonical(t.scan().to_arrow().to_pylist())
    assert canonical(duckdb_rows(t.metadata_location)) == ours, "DuckDB"
    scan = StaticTable.from_metadata(t.metadata_location).scan()
    if name in WITH_EQUALITY_DELETES:  # pyiceberg reads no equality deletes (yet)
        with pytest.raises(ValueError, match="equality deletes"):
            scan.to_arrow()
        return
    assert canonical(scan.to_arrow().to_pylist()) == ours, "pyiceberg"


def test_our_tables_hold_vectors_never_position_delete_files(built: Built) -> None:
    from stream_sink.maintenance.inventory import inventory

    for name in ("upsert3", "changelog3", "converted3"):
        t = built.catalog.load_table(f"db.{name}")
        kinds = set()
        for s in t.snapshots():
            for e in inventory(t, s).deletes:
                f = e.data_file
                if f.content == DataFileContent.POSITION_DELETES:
                    kinds.add(f.file_format)
        assert kinds == {FileFormat.PUFFIN}, name


def test_ours_reads_a_java_write_into_our_table(built: Built) -> None:
    t = built.catalog.load_table("db.upsert3")
    *_, delete, append = t.snapshots()
    assert canonical(t.scan(snapshot_id=delete.snapshot_id).to_arrow().to_pylist()) == [
        r for r in built.java[f"upsert3@{built.snapshots['upsert3'][-1]}"] if r[0] not in (0, 11)
    ]
    rows_now = canonical(t.scan().to_arrow().to_pylist())
    assert (40, "java", 0) in rows_now and all(r[0] not in (0, 11) for r in rows_now)
    assert append.first_row_id is not None and append.first_row_id >= delete.first_row_id
    assert t.metadata.next_row_id == append.first_row_id + append.added_rows


def test_ours_reads_every_snapshot_java_wrote_with_deletion_vectors(built: Built) -> None:
    t = built.catalog.load_table("db.java_dv")
    assert t.format_version == 3
    snaps = t.snapshots()
    assert len(snaps) == len(JAVA_STATEMENTS) - 1
    for i, s in enumerate(snaps):
        assert (
            canonical(t.scan(snapshot_id=s.snapshot_id).to_arrow().to_pylist())
            == (built.java[f"java_dv#{i}"])
        ), f"after {JAVA_STATEMENTS[i + 1][:40]}"
    vectors = [
        e.data_file
        for e in __import__("stream_sink.maintenance.inventory", fromlist=["x"])
        .inventory(t, snaps[-1])
        .deletes
        if e.data_file.is_deletion_vector
    ]
    assert vectors, "Java wrote deletion vectors"

"""Position delete files left from before a v3 upgrade, against Apache Iceberg Java (1.10).

Java writes a v2 merge-on-read table whose DELETE leaves partition-scoped position delete
files (``write.delete.granularity=partition``: one file naming several data files); we
upgrade it to v3; Java deletes again, writing a deletion vector for one data file (it
merges that file's position deletes into the vector but keeps the partition-scoped file,
which still names other data files). Our equality-delete conversion then retires every
position delete file: the data files without a vector get one holding their position
deletes, and the old files are removed in the same commit. Java, DuckDB, pyiceberg and
ours read the same rows before and after, and Java keeps writing into the table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from readers import duckdb_rows, pyiceberg_rows

import stream_sink as ss
from stream_sink.maintenance.inventory import inventory
from stream_sink.table.manifest import DataFileContent
from stream_sink.tables import IcebergTable

pytestmark = [pytest.mark.interop, pytest.mark.slow]

TABLE = "hc.db.pos"
BEFORE_UPGRADE = [
    f"CREATE TABLE {TABLE} (id bigint, v string) USING iceberg TBLPROPERTIES "
    "('format-version'='2', 'write.delete.mode'='merge-on-read', "
    "'write.delete.granularity'='partition')",
    f"INSERT INTO {TABLE} SELECT id, concat('v', id) FROM range(0, 10)",
    f"INSERT INTO {TABLE} SELECT id, concat('v', id) FROM range(10, 20)",
    f"DELETE FROM {TABLE} WHERE id % 3 = 0",
]
AFTER_UPGRADE = [f"DELETE FROM {TABLE} WHERE id = 4"]
AFTER_CONVERSION = [
    f"SELECT id, v FROM {TABLE}",
    f"DELETE FROM {TABLE} WHERE id = 5",  # a vector merged with one of ours
    f"SELECT id, v FROM {TABLE}",
]


def delete_kinds(t: IcebergTable) -> tuple[int, list[str]]:
    """(v2 position delete files, the data files with a deletion vector) now live."""
    inv = inventory(t.refresh(), t.current_snapshot())
    files = [e.data_file for e in inv.deletes]
    old = [f for f in files if f.content == DataFileContent.POSITION_DELETES]
    old = [f for f in old if not f.is_deletion_vector]
    return len(old), sorted(str(f.referenced_data_file) for f in files if f.is_deletion_vector)


def rows(records: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return sorted((int(r["id"]), str(r["v"])) for r in records)


def test_conversion_retires_position_deletes_java_left_after_the_upgrade(
    tmp_path: Path, java_sql: Any
) -> None:
    warehouse = str(tmp_path / "wh")
    java_sql(warehouse, BEFORE_UPGRADE)
    catalog = ss.load_catalog("hc", type="hadoop", warehouse=warehouse)
    t = catalog.load_table("db.pos")
    assert isinstance(t, IcebergTable)
    old_files, vectors = delete_kinds(t)
    assert old_files >= 1 and not vectors
    t.upgrade_format_version(3)
    java_sql(warehouse, AFTER_UPGRADE)

    expected = [(i, f"v{i}") for i in range(20) if i % 3 and i != 4]
    old_files, vectors = delete_kinds(t)
    assert old_files >= 1 and len(vectors) == 1  # Java kept the partition-scoped file
    assert rows(t.scan().to_arrow().to_pylist()) == expected

    result = t.maintenance.convert_equality_deletes()
    assert result.removed_position_delete_files == old_files
    old_files, vectors = delete_kinds(t)
    assert old_files == 0 and len(vectors) == len(set(vectors)) >= 2  # one per data file
    location = t.refresh().metadata_location
    for got in (t.scan().to_arrow().to_pylist(), duckdb_rows(location), pyiceberg_rows(location)):
        assert rows(got) == expected

    java_now, _, java_after = java_sql(warehouse, AFTER_CONVERSION)
    assert java_now is not None and java_after is not None
    assert rows(java_now.to_pylist()) == expected
    after = [r for r in expected if r[0] != 5]
    assert rows(java_after.to_pylist()) == after
    assert rows(t.refresh().scan().to_arrow().to_pylist()) == after
    assert delete_kinds(t)[0] == 0

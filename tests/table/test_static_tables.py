"""Tables opened from a metadata file, without their catalog (``load_static_table``):
every version readable by its file, a table directory of a SQL or REST catalog's layout
(``<NNNNN>-<uuid>.metadata.json``, no version hint) by its newest file, and every write
refused before anything is written.

Tests stream_sink.table.catalog.static: a table opened from its metadata file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import stream_sink as ss
from stream_sink.exceptions import NotFoundError, ReadOnlyTableError
from stream_sink.tables import IcebergTable

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def sql_table(tmp_path: Path) -> IcebergTable:
    """A table of a SQL catalog: metadata files named ``<NNNNN>-<uuid>.metadata.json``."""
    catalog = ss.load_catalog(
        "sql", type="sql", uri=f"sqlite:///{tmp_path}/c.db", warehouse=str(tmp_path / "wh")
    )
    catalog.create_namespace("db")
    table = catalog.create_table("db.events", SCHEMA)
    table.append(pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=SCHEMA))
    table.append(pa.table({"id": [3], "name": ["c"]}, schema=SCHEMA))
    return table


def metadata_files(table: IcebergTable) -> list[Path]:
    return sorted((Path(table.location) / "metadata").glob("*.metadata.json"))


def test_a_directory_opens_at_its_newest_file_and_each_file_at_its_version(
    tmp_path: Path,
) -> None:
    table = sql_table(tmp_path)
    files = metadata_files(table)
    assert [f.name[:6] for f in files] == ["00000-", "00001-", "00002-"]
    newest = ss.load_static_table(table.location)
    assert newest.metadata_location == str(files[-1])
    assert newest.name == "db.events"
    assert sorted(newest.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3]
    first = ss.load_static_table(str(files[1]))
    assert first.scan().to_arrow().column("id").to_pylist() == [1, 2]
    assert ss.load_static_table(f"{table.location}/metadata/").metadata_location == str(files[-1])
    snap = table.refresh().snapshots()[0].snapshot_id
    assert newest.scan(snapshot_id=snap).count() == 2


def test_a_hadoop_table_opens_at_its_version_hint(tmp_path: Path) -> None:
    catalog = ss.load_catalog("h", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", SCHEMA)
    table.append(pa.table({"id": [1], "name": ["a"]}, schema=SCHEMA))
    static = ss.load_static_table(table.location)
    assert static.metadata_location == table.refresh().metadata_location
    assert static.scan().count() == 1


def test_every_write_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    table = sql_table(tmp_path)
    static = ss.load_static_table(table.location)
    before = sorted(p for p in Path(table.location).rglob("*"))
    rows = pa.table({"id": [9], "name": ["z"]}, schema=SCHEMA)
    writes = {
        "append": lambda: static.append(rows),
        "upsert": lambda: static.upsert(rows, ["id"]),
        "schema": lambda: static.update_schema(),
        "row delta": lambda: static.new_row_delta(),
        "expire": lambda: static.new_expire_snapshots(),
        "maintenance": lambda: static.maintenance,
        "commit": lambda: static.catalog.commit(static.identifier, "x", static.metadata),
        "create": lambda: static.catalog.create_table("db.other", SCHEMA),
        "drop": lambda: static.catalog.drop_table("db.events"),
    }
    for what, write in writes.items():
        with pytest.raises(ReadOnlyTableError, match="opened from its metadata file") as e:
            write()
        assert str(metadata_files(table)[-1]) in str(e.value), what
        assert "load_catalog(...).load_table(...)" in str(e.value), what
    assert sorted(p for p in Path(table.location).rglob("*")) == before


def test_nothing_to_open_and_two_newest_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="holds no metadata file"):
        ss.load_static_table(str(tmp_path))
    with pytest.raises(NotFoundError, match="does not exist"):
        ss.load_static_table(str(tmp_path / "00001-x.metadata.json"))
    table = sql_table(tmp_path)
    newest = metadata_files(table)[-1]
    twin = newest.with_name("00002-9c12d441-03fe-4693-9a96-a0705ddf69c1.metadata.json")
    shutil.copy(newest, twin)
    with pytest.raises(NotFoundError, match="2 metadata files have the highest version 2"):
        ss.load_static_table(table.location)
    assert ss.load_static_table(str(twin)).scan().count() == 3

"""A corrupt current metadata file: every reader fails with the file and the way out;
`stream-sink table recover` shows what going back loses, then does it.

Tests stream_sink.cli.recover_command: ``stream-sink table recover``.
Tests stream_sink.table.recovery: the metadata versions a table can go back to."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from readers import duckdb_connection

import stream_sink as ss
from stream_sink.cli.main import main
from stream_sink.exceptions import CorruptMetadataError
from stream_sink.table.catalog import Catalog


def _catalog(tmp_path: Path, kind: str) -> tuple[Catalog, list[str]]:
    wh = str(tmp_path / "wh")
    if kind == "hadoop":
        return ss.load_catalog("local", type="hadoop", warehouse=wh), ["--warehouse", wh]
    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    catalog = ss.load_catalog("local", type="sql", uri=uri, warehouse=wh)
    return catalog, ["--catalog-uri", uri, "--warehouse", wh]


@pytest.mark.parametrize("kind", ["hadoop", "sql"])
def test_corrupt_current_metadata_file_is_named_and_recovered_to_an_older_version(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog, where = _catalog(tmp_path, kind)
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", schema=pa.schema([("id", pa.int64())]))
    for i in range(3):
        table.append(pa.table({"id": [i]}))
    broken = table.metadata_location
    with open(broken, "r+b") as f:
        f.truncate(os.path.getsize(broken) // 2)

    with pytest.raises(CorruptMetadataError) as e:
        catalog.load_table("db.t")
    assert broken in str(e.value) and "stream-sink table recover db.t" in str(e.value)

    assert main(["table", "recover", "db.t", *where]) == 0
    listing = capsys.readouterr().out
    assert "NO" in listing and "not valid JSON" in listing
    back = "3" if kind == "hadoop" else "2"  # SQL catalogs number metadata files from 0
    assert main(["table", "recover", "db.t", "--to-version", back, *where]) == 0
    preview = capsys.readouterr().out
    assert "UNREADABLE" in preview and "nothing changed" in preview
    with pytest.raises(CorruptMetadataError):
        catalog.load_table("db.t")  # a preview changes nothing

    assert main(["table", "recover", "db.t", "--to-version", back, "--yes", *where]) == 0
    assert "done" in capsys.readouterr().out
    recovered = catalog.load_table("db.t")
    assert sorted(recovered.scan().to_arrow()["id"].to_pylist()) == [0, 1]
    recovered.append(pa.table({"id": [7]}))  # writers work again
    loc = catalog.load_table("db.t").metadata_location.replace("'", "''")
    rows = duckdb_connection().execute(f"SELECT id FROM iceberg_scan('{loc}')").fetchall()
    assert sorted(r[0] for r in rows) == [0, 1, 7]

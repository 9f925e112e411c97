"""A commit on top of a snapshot whose manifest is missing or truncated fails, instead of
carrying the broken reference into a new snapshot."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from stream_sink.catalogs import load_catalog
from stream_sink.exceptions import CorruptMetadataError, MissingFileError
from stream_sink.table.manifest import read_manifest_list
from stream_sink.table.table import Table


@pytest.fixture
def table(tmp_path: Path) -> Table:
    catalog = load_catalog("test", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    t = catalog.create_table("db.t", schema=pa.schema([("id", pa.int64())]))
    t.append(pa.table({"id": [1]}))
    t.append(pa.table({"id": [2]}))
    return t


def _newest_manifest(table: Table) -> str:
    snap = table.refresh().current_snapshot()
    assert snap is not None
    manifests = read_manifest_list(table.io, snap.manifest_list)
    return next(m.manifest_path for m in manifests if m.added_snapshot_id == snap.snapshot_id)


@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_append_over_a_broken_manifest_fails_instead_of_carrying_it(
    table: Table, damage: str
) -> None:
    path = _newest_manifest(table)
    if damage == "missing":
        os.remove(path)
    else:
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)
    before = table.metadata_location
    error = MissingFileError if damage == "missing" else CorruptMetadataError
    with pytest.raises(error, match="refusing to carry it") as e:
        table.append(pa.table({"id": [3]}))
    assert path in str(e.value)
    assert table.refresh().metadata_location == before

"""Strings that are not UTF-8: refused naming the column and row, or repaired on request.

Tests stream_sink.table.utf8: strings checked as UTF-8, refused or repaired."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from stream_sink.catalogs import load_catalog
from stream_sink.exceptions import InvalidStringError
from stream_sink.table.table import Table

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])


def _bad_rows() -> pa.Table:
    raw = pa.array([b"ok", b"fine", b"\xff\xfeab", None], pa.binary())
    names = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers(), raw.null_count)
    return pa.table({"id": pa.array([0, 1, 2, 3], pa.int64()), "name": names}, schema=SCHEMA)


def _table(tmp_path: Path, **properties: str) -> Table:
    catalog = load_catalog("test", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    return catalog.create_table("db.t", schema=SCHEMA, properties=properties)


def test_invalid_utf8_is_refused_naming_column_and_row(tmp_path: Path) -> None:
    table = _table(tmp_path)
    with pytest.raises(InvalidStringError, match=r"column 'name' holds invalid UTF-8 at row 2"):
        table.append(_bad_rows())
    assert table.refresh().current_snapshot() is None


def test_invalid_utf8_is_replaced_when_the_table_asks_for_it(tmp_path: Path) -> None:
    table = _table(tmp_path, **{"write.invalid-utf8": "replace"})
    table.append(_bad_rows())
    names = table.scan().to_arrow().sort_by("id")["name"].to_pylist()
    assert names == ["ok", "fine", "\ufffd\ufffdab", None]

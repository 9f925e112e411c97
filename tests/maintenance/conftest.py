"""Fixtures shared by the maintenance tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from stream_sink.catalogs import load_catalog
from stream_sink.table.catalog import Catalog


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    c = load_catalog("m", type="hadoop", warehouse=str(tmp_path / "wh"))
    c.create_namespace("db")
    return c

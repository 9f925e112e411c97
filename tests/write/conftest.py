"""The write tests' ``catalog``: the shared ``hadoop_catalog`` (namespace ``db``)."""

from __future__ import annotations

import pytest

from stream_sink.table.catalog import Catalog


@pytest.fixture
def catalog(hadoop_catalog: Catalog) -> Catalog:
    return hadoop_catalog

"""Fixtures of the committer tests: a Hadoop-catalog warehouse, a table, both backends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import SCHEMA, Harness

from stream_sink.catalogs import load_catalog
from stream_sink.commit import reset_failpoints
from stream_sink.table.catalog import Catalog
from stream_sink.table.table import Table


@pytest.fixture(params=["memory", "rocksdb"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def warehouse(tmp_path: Path) -> Catalog:
    catalog = load_catalog("test", type="hadoop", warehouse=str(tmp_path / "warehouse"))
    catalog.create_namespace("db")
    return catalog


@pytest.fixture
def table(warehouse: Catalog) -> Table:
    return warehouse.create_table(
        "db.t",
        schema=SCHEMA,
        identifier_fields=["id"],
        properties={"commit.retry.min-wait-ms": "1"},
    )


@pytest.fixture
def harness(tmp_path: Path, table: Table, backend: str) -> Iterator[Callable[..., Harness]]:
    """``harness(job_id=..., operator_id=..., **committer options)``: opened harnesses,
    closed at the end of the test."""
    made: list[Harness] = []

    def make(job_id: str = "job-1", operator_id: str = "sink", **options: Any) -> Harness:
        h = Harness(tmp_path, table, backend, job_id=job_id, operator_id=operator_id, **options)
        h.open()
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()


@pytest.fixture(autouse=True)
def _no_failpoints() -> Iterator[None]:
    reset_failpoints("")
    yield
    reset_failpoints()

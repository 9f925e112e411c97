"""Fixtures shared by every test directory.

``postgres_url``: a PostgreSQL server for the whole test session. It is the one
named by ``STREAM_SINK_TEST_POSTGRES_URL`` when set; otherwise ``.ci/postgres.sh``
starts a throwaway one (installing Debian's postgresql when missing and
possible). Tests that need it are skipped only when PostgreSQL cannot be
installed on this machine.

``catalog``: an empty catalog, parametrized over hadoop, sqlite and postgres.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from stream_sink.catalogs import load_catalog
from stream_sink.table.catalog import Catalog

REPO = Path(__file__).resolve().parent.parent
POSTGRES_SCRIPT = REPO / ".ci" / "postgres.sh"
NOT_INSTALLABLE = 3  # .ci/postgres.sh: PostgreSQL is not installed and cannot be


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    url = os.environ.get("STREAM_SINK_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    directory = tempfile.mkdtemp(prefix="stream-sink-pg-")
    try:
        proc = subprocess.run(
            ["bash", str(POSTGRES_SCRIPT), directory],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if proc.returncode == NOT_INSTALLABLE:
            pytest.skip(f"PostgreSQL cannot be installed here: {proc.stderr.strip()[-300:]}")
        if proc.returncode != 0:
            pytest.fail(f".ci/postgres.sh failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        yield proc.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run(
            ["bash", str(POSTGRES_SCRIPT), "stop", directory], capture_output=True, timeout=120
        )
        shutil.rmtree(directory, ignore_errors=True)


CATALOG_KINDS = ["hadoop", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def open_catalog(kind: str, root: Path, request: pytest.FixtureRequest, name: str) -> Catalog:
    """A new, empty catalog of ``kind`` with its warehouse under ``root``."""
    warehouse = str(root / "warehouse")
    if kind == "hadoop":
        return load_catalog(name, type="hadoop", warehouse=warehouse)
    if kind == "sqlite":
        return load_catalog(name, type="sql", uri=f"sqlite:///{root}/catalog.db",
                            warehouse=warehouse)
    if kind == "postgres":
        url = request.getfixturevalue("postgres_url")
        # a fresh catalog name isolates the test inside the shared database
        return load_catalog(name, type="sql", uri=url, warehouse=warehouse)
    raise ValueError(kind)


@pytest.fixture(params=CATALOG_KINDS)
def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Catalog]:
    cat = open_catalog(request.param, tmp_path, request, f"test_{uuid.uuid4().hex[:12]}")
    yield cat
    cat.close()

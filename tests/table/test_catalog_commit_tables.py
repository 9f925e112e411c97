"""Commits of several tables at once (``Catalog.commit_tables``): the SQL catalog (SQLite
and PostgreSQL) swaps every pointer in one database transaction, so a failure on any
table leaves every table where it was; catalogs that cannot (Hadoop) say so and commit
nothing."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from stream_sink import load_catalog
from stream_sink.exceptions import (
    AtomicCommitUnsupportedError,
    CommitFailedError,
    ValidationError,
)
from stream_sink.table.catalog import Catalog
from stream_sink.table.catalog.base import TableCommit
from stream_sink.table.catalog.sql import SqlCatalog
from stream_sink.table.schema import Schema
from stream_sink.table.types import LongType, NestedField

SCHEMA = Schema(NestedField(1, "id", LongType(), required=True))
NAMES = ("db.orders", "db.lines", "db.stock")


def sqlite_catalog(root: Path) -> SqlCatalog:
    cat = load_catalog(
        "shop", type="sql", uri=f"sqlite:///{root}/catalog.db", warehouse=str(root / "wh")
    )
    assert isinstance(cat, SqlCatalog)
    return cat


Opener = Callable[[], SqlCatalog]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def open_sql(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens the same SQL catalog each call (a second one is another connection)."""
    opened: list[SqlCatalog] = []
    if request.param == "sqlite":
        uri = f"sqlite:///{tmp_path}/catalog.db"
    else:
        uri = request.getfixturevalue("postgres_url")
    name = f"shop_{uuid.uuid4().hex[:8]}"

    def open_one() -> SqlCatalog:
        cat = load_catalog(name, type="sql", uri=uri, warehouse=str(tmp_path / "wh"))
        assert isinstance(cat, SqlCatalog)
        opened.append(cat)
        return cat

    yield open_one
    for cat in opened:
        cat.close()


def with_tables(cat: Catalog) -> Catalog:
    cat.create_namespace("db")
    for name in NAMES:
        cat.create_table(name, SCHEMA)
    return cat


def property_change(cat: Catalog, name: str, value: str) -> TableCommit:
    t = cat.load_table(name)
    new = t.metadata.with_properties({"checkpoint": value})
    return TableCommit(t.identifier, t.metadata_location, t.metadata, new)


def pointers(cat: Catalog) -> dict[str, str]:
    return {n: cat.current_metadata_location(n) for n in NAMES}


def test_sql_catalog_moves_every_table_in_one_commit(open_sql: Opener) -> None:
    cat = with_tables(open_sql())
    before = pointers(cat)
    assert cat.multi_table_commit_problem() is None
    done = cat.commit_tables([property_change(cat, n, "7") for n in NAMES])
    assert [".".join(d.identifier) for d in done] == list(NAMES)
    for d in done:
        assert cat.current_metadata_location(d.identifier) == d.location
        assert cat.load_table(d.identifier).properties["checkpoint"] == "7"
        assert d.metadata.metadata_log[-1].value == before[".".join(d.identifier)]


def test_a_stale_second_table_leaves_the_first_untouched(open_sql: Opener, tmp_path: Path) -> None:
    cat = with_tables(open_sql())
    commits = [property_change(cat, n, "7") for n in NAMES]
    # another writer moves the second table after the change was computed
    cat.commit_tables([property_change(cat, NAMES[1], "other")])
    before = pointers(cat)
    files_before = sorted(p.name for p in (tmp_path / "wh").rglob("*.metadata.json"))
    with pytest.raises(CommitFailedError, match=r"db\.lines.*no table of the commit moved"):
        cat.commit_tables(commits)
    assert pointers(cat) == before
    assert "checkpoint" not in cat.load_table(NAMES[0]).properties
    # the new metadata files of the failed commit are gone
    assert sorted(p.name for p in (tmp_path / "wh").rglob("*.metadata.json")) == files_before


def test_a_failure_inside_the_transaction_rolls_every_swap_back(open_sql: Opener) -> None:
    cat = with_tables(open_sql())
    before = pointers(cat)
    moved: list[str] = []

    def fail_on_second(ident: tuple[str, ...]) -> None:
        moved.append(".".join(ident))
        if len(moved) == 2:
            # a reader outside the transaction still sees the first table unmoved
            other = open_sql()
            assert other.current_metadata_location(NAMES[0]) == before[NAMES[0]]
            raise RuntimeError("crash inside the swap of the second table")

    with pytest.raises(RuntimeError, match="second table"):
        cat.commit_tables(
            [property_change(cat, n, "7") for n in NAMES], after_each_swap=fail_on_second
        )
    assert moved == [NAMES[0], NAMES[1]]
    assert pointers(cat) == before


def test_a_failing_database_statement_moves_no_table(tmp_path: Path) -> None:
    cat = with_tables(sqlite_catalog(tmp_path))
    before = pointers(cat)
    commits = [property_change(cat, n, "7") for n in NAMES]
    with cat.engine.begin() as conn:  # the third table's row refuses updates
        conn.execute(
            text(
                "CREATE TRIGGER refuse BEFORE UPDATE ON iceberg_tables "
                "WHEN OLD.table_name = 'stock' BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
        )
    with pytest.raises(CommitFailedError, match="refused the update"):
        cat.commit_tables(commits)
    assert pointers(cat) == before


def test_each_table_once_and_at_least_one(tmp_path: Path) -> None:
    cat = with_tables(sqlite_catalog(tmp_path))
    with pytest.raises(ValidationError, match=r"db\.orders twice"):
        cat.commit_tables([property_change(cat, NAMES[0], "1")] * 2)
    with pytest.raises(ValidationError, match="at least one"):
        cat.commit_tables([])


def test_hadoop_catalog_says_it_cannot(tmp_path: Path) -> None:
    cat = with_tables(load_catalog("h", type="hadoop", warehouse=str(tmp_path / "wh")))
    problem = cat.multi_table_commit_problem()
    assert problem is not None and "on its own" in problem
    before = pointers(cat)
    with pytest.raises(AtomicCommitUnsupportedError):
        cat.commit_tables([property_change(cat, n, "7") for n in NAMES])
    assert pointers(cat) == before

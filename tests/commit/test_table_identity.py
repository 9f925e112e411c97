"""A checkpoint location or operator state reused for another table is refused before
anything is committed: one table's staged batches never land in another.

Tests stream_sink.commit.identity: which table a sink's state and checkpoints belong to."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import SCHEMA, Harness, table_rows, write_rows

from stream_sink.exceptions import TableMismatchError
from stream_sink.table.catalog import Catalog
from stream_sink.table.table import Table


def _pending_batches(h: Harness, table: Table) -> None:
    h.step(0, write_rows(table, [(0, "a")]))
    h.process(1, write_rows(table, [(1, "b")]))
    h.process(2, write_rows(table, [(2, "c")]))
    h.crash()


@pytest.fixture
def other(warehouse: Catalog) -> Table:
    return warehouse.create_table("db.b", schema=SCHEMA, identifier_fields=["id"])


def test_reused_checkpoint_location_with_explicit_sink_id_never_commits_into_another_table(
    tmp_path: Path, table: Table, other: Table, backend: str
) -> None:
    first = Harness(tmp_path, table, backend, job_id="job-1", operator_id="orders-sink")
    first.open()
    _pending_batches(first, table)
    second = Harness(tmp_path, other, backend, job_id="job-1", operator_id="orders-sink")
    for _ in range(2):
        with pytest.raises(TableMismatchError, match="belongs to another table") as e:
            second.open(acknowledged=[0, 1, 2])
        assert "db.t" in str(e.value) and "db.b" in str(e.value)
    assert table_rows(other) == []
    first.open(acknowledged=[0, 1, 2])  # the right table still gets its batches
    first.close()
    assert table_rows(table) == [(0, "a"), (1, "b"), (2, "c")]


def test_reused_state_without_checkpoints_is_refused_for_another_table(
    tmp_path: Path, table: Table, other: Table, backend: str
) -> None:
    """The state alone records the table: the checkpoint storage was wiped."""
    first = Harness(tmp_path, table, backend, job_id="job-1", operator_id="orders-sink")
    first.open()
    _pending_batches(first, table)
    (tmp_path / "checkpoints" / "orders-sink" / "_table.json").unlink()
    second = Harness(tmp_path, other, backend, job_id="job-1", operator_id="orders-sink")
    with pytest.raises(TableMismatchError, match="belongs to another table: the operator state at"):
        second.open(acknowledged=[0, 1, 2])
    assert table_rows(other) == []


def test_reused_checkpoint_location_with_default_sink_id_says_it_belongs_to_another_table(
    tmp_path: Path, table: Table, other: Table, backend: str
) -> None:
    """Default sink ids differ per table, so the state is not shared; Spark's commit log
    is, and its acknowledged batches must not be blamed on missing state."""
    first = Harness(tmp_path, table, backend, job_id="job-1", operator_id="db.t")
    first.open()
    _pending_batches(first, table)
    second = Harness(tmp_path, other, backend, job_id="job-1", operator_id="db.b")
    with pytest.raises(TableMismatchError, match="belongs to another table") as e:
        second.open(acknowledged=[0, 1, 2])
    assert "missing or corrupt" not in str(e.value) and "sink db.t of table db.t" in str(e.value)
    assert table_rows(other) == []

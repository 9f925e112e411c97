"""Commit retries that run out say so, and that the batches are safe."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from harness import Harness, table_rows, write_rows

from stream_sink.commit.iceberg import table_commit
from stream_sink.exceptions import CommitFailedError
from stream_sink.table.table import Table


def test_commit_retries_running_out_say_so_and_lose_nothing(
    table: Table, harness: Callable[..., Harness], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer wins every race: it commits right before each attempt's swap."""
    h = harness()
    h.step(0, write_rows(table, [(0, "a")]))
    h.process(1, write_rows(table, [(1, "b")]))
    h.checkpoint(1)
    rival = table.catalog.load_table(table.identifier)
    monkeypatch.setattr(table_commit, "failpoint", lambda name: rival.new_fast_append().commit())
    with pytest.raises(CommitFailedError, match="retries ran out") as e:
        h.notify(1)
    assert "Nothing is lost" in str(e.value) and "batches 1..1" in str(e.value)
    assert isinstance(e.value.__cause__, CommitFailedError)
    monkeypatch.undo()
    h.crash()
    h.open(acknowledged=[0, 1])
    h.close()
    assert table_rows(table) == [(0, "a"), (1, "b")]

"""Files that disappear under a stopped sink: a staged or pending batch whose data file,
or whose staging manifest, is gone is never committed; the table stays readable.

Tests stream_sink.commit.file_check: a restored batch's files checked before its commit."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from harness import Harness, snapshot_count, table_rows, write_rows

from stream_sink.exceptions import MissingFileError
from stream_sink.table.table import Table

MakeHarness = Callable[..., Harness]


def test_deleted_staged_data_file_is_never_committed(table: Table, harness: MakeHarness) -> None:
    h = harness()
    h.step(0, write_rows(table, [(0, "a")]))
    lost = write_rows(table, [(1, "b")])
    h.process(1, lost)
    h.checkpoint(1)  # staged and complete, not committed
    h.crash()
    path = lost.data_files[0].file_path
    os.remove(path)
    for _ in range(2):  # refused every time, the table never touched
        with pytest.raises(MissingFileError, match=r"batch 1 \(checkpoint 1\)") as e:
            h.open(acknowledged=[0, 1])
        assert path in str(e.value) and "Nothing was committed" in str(e.value)
    assert snapshot_count(table) == 1 and table_rows(table) == [(0, "a")]


def test_deleted_pending_data_file_is_never_committed(table: Table, harness: MakeHarness) -> None:
    h = harness()
    lost = write_rows(table, [(0, "a")])
    h.process(0, lost)
    h.crash()
    os.remove(lost.data_files[0].file_path)
    with pytest.raises(MissingFileError, match=r"batch 0 \(pending\)"):
        h.open(acknowledged=[0])
    assert snapshot_count(table) == 0


def test_missing_staging_manifest_says_what_it_is_and_what_to_do(
    table: Table, harness: MakeHarness
) -> None:
    h = harness()
    h.process(0, write_rows(table, [(0, "a")]))
    h.checkpoint(0)
    h.crash()
    for name in h.staging_manifests():
        os.remove(os.path.join(table.metadata_dir, name))
    with pytest.raises(MissingFileError, match="staging manifest of batch 0") as e:
        h.open(acknowledged=[0])
    assert "Put the manifest back" in str(e.value) and "replay the batch" in str(e.value)
    assert snapshot_count(table) == 0

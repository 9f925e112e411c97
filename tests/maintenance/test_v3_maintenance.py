"""Maintenance on v3 CDC tables: equality deletes become deletion vectors (merged with
each data file's vector and position deletes, one vector per data file), compaction
keeps rows exact, and pyiceberg, DuckDB and ours read the same rows after each step."""

from __future__ import annotations

from collections import Counter

import pytest
from maint_support import live_counts, make_cdc_table, ours, rows_of
from readers import duckdb_rows, pyiceberg_rows

from stream_sink.maintenance.inventory import inventory
from stream_sink.table.catalog import Catalog
from stream_sink.table.manifest import DataFileContent, FileFormat
from stream_sink.table.table import Table

V3 = {"format-version": "3"}


def vectors_per_data_file(table: Table) -> Counter[str]:
    inv = inventory(table.refresh(), table.current_snapshot())
    deletes = [e.data_file for e in inv.deletes]
    positional = [d for d in deletes if d.content == DataFileContent.POSITION_DELETES]
    assert all(d.file_format == FileFormat.PUFFIN for d in positional), "no position files"
    return Counter(str(d.referenced_data_file) for d in positional)


def every_reader(table: Table) -> list[list[tuple[int, str, int]]]:
    location = table.refresh().metadata_location
    return [ours(table), rows_of(duckdb_rows(location)), rows_of(pyiceberg_rows(location))]


@pytest.mark.slow
@pytest.mark.parametrize("spec", [[], [("bucket", "id", 4)]], ids=["unpartitioned", "bucket"])
def test_conversion_to_vectors_then_compaction_on_v3(catalog: Catalog, spec: list) -> None:
    cdc = make_cdc_table(catalog, "db.t", batches=6, rows=50, seed=3, partition_spec=spec,
                         properties=V3)  # fmt: skip
    table, m = cdc.table, cdc.table.maintenance
    assert live_counts(table)["eq"] > 0
    converted = m.convert_equality_deletes()
    assert converted.removed_equality_delete_files > 0 and live_counts(table)["eq"] == 0
    counts = vectors_per_data_file(table)
    assert counts and max(counts.values()) == 1
    for rows in every_reader(table):
        assert rows == cdc.expected()
    cdc.commit_batch(40)  # new equality deletes on files that already have vectors
    m.convert_equality_deletes()
    assert max(vectors_per_data_file(table).values()) == 1  # merged, not added
    for rows in every_reader(table):
        assert rows == cdc.expected()
    m.rewrite_data_files(min_input_files=1)
    m.remove_dangling_deletes()
    after = live_counts(table)
    assert (after["pos"], after["eq"]) == (0, 0)
    for rows in every_reader(table):
        assert rows == cdc.expected()
    snap = table.current_snapshot()
    assert snap.first_row_id is not None and table.metadata.next_row_id >= snap.first_row_id


@pytest.mark.slow
def test_an_upgraded_table_merges_its_position_deletes_into_vectors(catalog: Catalog) -> None:
    cdc = make_cdc_table(catalog, "db.t", batches=5, rows=60, seed=4)
    table = cdc.table
    old_files = live_counts(table)["pos"]
    assert old_files > 0  # v2 position delete files (same-batch updates)
    table.upgrade_format_version(3)
    result = table.maintenance.convert_equality_deletes()
    # every position delete file is merged into vectors and removed (the spec: a vector
    # replaces them), none is left behind
    assert result.removed_position_delete_files == old_files
    counts = vectors_per_data_file(table)
    assert counts and max(counts.values()) == 1
    for rows in every_reader(table):
        assert rows == cdc.expected()
    assert table.maintenance.convert_equality_deletes().snapshot_id is None  # nothing left

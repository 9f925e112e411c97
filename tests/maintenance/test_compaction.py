"""Compaction and equality-delete conversion on CDC tables: the rows stay exact for our
reader and DuckDB (and, once converted, pyiceberg; Java in test_interop), file counts
drop, and a rewrite that conflicts leaves the table as it was and deletes its files.

Tests stream_sink.maintenance.compaction: planning and committing bin-pack rewrites.
Tests stream_sink.maintenance.conversion: equality deletes converted to position deletes.
Tests stream_sink.maintenance.dangling: dangling delete files removed."""

from __future__ import annotations

import pytest
from maint_support import files_under, live_counts, make_cdc_table, ours, rows_of, upsert
from readers import duckdb_rows, pyiceberg_rows

from stream_sink.exceptions import CommitValidationError, InvalidOptionError
from stream_sink.table.catalog import Catalog

SPECS = {"unpartitioned": [], "bucket": [("bucket", "id", 4)]}


@pytest.mark.parametrize("shape", list(SPECS))
def test_compaction_then_conversion_keeps_rows_exact(catalog: Catalog, shape: str) -> None:
    cdc = make_cdc_table(
        catalog, f"db.{shape}", batches=8, rows=40, seed=1, partition_spec=SPECS[shape]
    )
    table = cdc.table
    before = live_counts(table)
    assert before["eq"] > 0 and before["data"] >= 8

    m = table.maintenance
    plan = m.plan_rewrite_data_files(min_input_files=2)
    assert plan.groups and plan.snapshot_id == table.current_snapshot().snapshot_id
    result = plan.execute()
    assert result.rewritten_data_files == plan.input_files
    assert result.written_records <= result.rewritten_records
    assert ours(table) == cdc.expected()
    assert rows_of(duckdb_rows(table.metadata_location)) == cdc.expected()

    m.remove_dangling_deletes()
    converted = m.convert_equality_deletes()
    after = live_counts(table)
    assert after["eq"] == 0
    assert converted.removed_equality_delete_files >= 0
    assert ours(table) == cdc.expected()
    assert rows_of(duckdb_rows(table.metadata_location)) == cdc.expected()
    assert rows_of(pyiceberg_rows(table.metadata_location)) == cdc.expected()
    assert after["data"] < before["data"]


def test_conversion_before_compaction_then_compaction_drops_every_delete(
    catalog: Catalog,
) -> None:
    cdc = make_cdc_table(catalog, "db.t", batches=6, rows=50, seed=2)
    table = cdc.table
    m = table.maintenance
    eq_before = live_counts(table)["eq"]
    converted = m.convert_equality_deletes()
    assert converted.removed_equality_delete_files == eq_before > 0
    assert live_counts(table)["eq"] == 0
    assert ours(table) == cdc.expected()
    assert converted.added_position_deletes > 0
    assert rows_of(pyiceberg_rows(table.metadata_location)) == cdc.expected()
    # more CDC on top, then compact everything with a delete
    cdc.commit_batch(30)
    m.convert_equality_deletes()
    m.rewrite_data_files(min_input_files=1)
    m.remove_dangling_deletes()
    assert live_counts(table) == {"data": 1, "pos": 0, "eq": 0}
    for reader in (
        ours(table),
        rows_of(duckdb_rows(table.metadata_location)),
        rows_of(pyiceberg_rows(table.metadata_location)),
    ):
        assert reader == cdc.expected()


def test_second_identical_compaction_is_refused_and_cleans_up(catalog: Catalog) -> None:
    cdc = make_cdc_table(catalog, "db.t", batches=6, rows=20, seed=3)
    table = cdc.table
    first = table.maintenance.plan_rewrite_data_files(min_input_files=2)
    second = table.maintenance.plan_rewrite_data_files(min_input_files=2)
    first.execute()
    location, files = table.refresh().metadata_location, files_under(table.data_location)
    with pytest.raises(CommitValidationError):
        second.execute()
    assert table.refresh().metadata_location == location
    assert files_under(table.data_location) == files  # what it wrote is gone
    assert ours(table) == cdc.expected()


@pytest.mark.parametrize("starting_sequence", [True, False])
def test_update_of_a_planned_row_during_compaction(
    catalog: Catalog, starting_sequence: bool
) -> None:
    """Plan, then an upsert changes a row of a planned file (an equality delete): with the
    starting sequence number the compaction commits and the update still applies; without
    it the compaction is refused, and the table is exactly as the update left it."""
    cdc = make_cdc_table(catalog, "db.t", batches=5, rows=20, seed=4)
    table = cdc.table
    plan = table.maintenance.plan_rewrite_data_files(
        min_input_files=2, use_starting_sequence_number=starting_sequence
    )
    key = sorted(cdc.model)[0]
    row = (key, "z", 4242)
    upsert(table, [("+U", row)])
    cdc.model[key] = row
    location, files = table.refresh().metadata_location, files_under(table.data_location)
    if starting_sequence:
        plan.execute()
    else:
        with pytest.raises(CommitValidationError):
            plan.execute()
        assert table.refresh().metadata_location == location
        assert files_under(table.data_location) == files
    assert ours(table) == cdc.expected()
    assert rows_of(duckdb_rows(table.refresh().metadata_location)) == cdc.expected()


@pytest.mark.parametrize("version", ["2", "3"], ids=["v2", "v3"])
def test_conversion_refused_when_a_compaction_removed_its_files(
    catalog: Catalog, version: str
) -> None:
    props = {"format-version": version}
    cdc = make_cdc_table(catalog, "db.t", batches=6, rows=30, seed=5, properties=props)
    table = cdc.table
    other = catalog.load_table("db.t")
    # the conversion plans and writes, then a compaction commits before it does
    from stream_sink.maintenance import conversion

    real_commit = conversion._commit

    def compact_first(*args, **kwargs):  # type: ignore[no-untyped-def]
        other.maintenance.rewrite_data_files(min_input_files=1)
        return real_commit(*args, **kwargs)

    conversion._commit = compact_first  # type: ignore[assignment]
    try:
        files = None
        with pytest.raises(CommitValidationError):
            files = files_under(table.data_location)
            table.maintenance.convert_equality_deletes()
    finally:
        conversion._commit = real_commit  # type: ignore[assignment]
    assert files is not None
    left = files_under(table.data_location)
    assert not any("convert" in f and ("pos-deletes" in f or "puffin" in f) for f in left)
    assert ours(table) == cdc.expected()


def test_bad_options_are_refused(catalog: Catalog) -> None:
    cdc = make_cdc_table(catalog, "db.t", batches=1, rows=5)
    with pytest.raises(InvalidOptionError):
        cdc.table.maintenance.plan_rewrite_data_files(min_input_files=0)


def test_empty_table_plans_nothing(catalog: Catalog) -> None:
    from maint_support import SCHEMA

    table = catalog.create_table("db.empty", schema=SCHEMA)
    m = table.maintenance
    assert m.plan_rewrite_data_files().groups == ()
    assert m.rewrite_data_files().rewritten_data_files == 0
    assert m.convert_equality_deletes().removed_equality_delete_files == 0


def test_a_corrupt_manifest_is_named(catalog: Catalog) -> None:
    from stream_sink.exceptions import CorruptMetadataError
    from stream_sink.maintenance.inventory import manifest_list

    cdc = make_cdc_table(catalog, "db.t", batches=3, rows=10, seed=6)
    table = cdc.table
    manifest = manifest_list(table, table.current_snapshot())[0].manifest_path
    with open(manifest, "r+b") as f:
        f.seek(40)
        f.write(b"\xff" * 64)
    for action in (
        table.maintenance.convert_equality_deletes,
        lambda: table.maintenance.rewrite_data_files(min_input_files=1),
    ):
        with pytest.raises(CorruptMetadataError, match=manifest.rsplit("/", 1)[-1]):
            action()

"""The rewrite operation (Java's RewriteFiles): one ``replace`` snapshot with the same
rows, sequence numbers as asked, refusal of rewrites that conflict with concurrent
deletes or with another rewrite, and nothing left behind by a refused one.

Tests stream_sink.table.rewrite: RewriteFiles."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from compaction import commit_compaction, live_files, plan_compaction

from stream_sink.catalogs import load_catalog
from stream_sink.exceptions import CommitValidationError, ValidationError
from stream_sink.table.manifest import DataFileContent, read_manifest, read_manifest_list
from stream_sink.tables import IcebergTable
from stream_sink.write.writer_factory import TaskWriterFactory

ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("data", pa.string())])


def rows(*pairs: tuple[int, str]) -> pa.Table:
    return pa.table({"id": [p[0] for p in pairs], "data": [p[1] for p in pairs]}, schema=ARROW)


@pytest.fixture
def table(tmp_path: Path) -> IcebergTable:
    catalog = load_catalog("rw", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    return catalog.create_table("db.t", ARROW, identifier_fields=["id"])


def read(table: IcebergTable) -> list[tuple[int, str]]:
    t = table.refresh().scan().to_arrow()
    return sorted(zip(t["id"].to_pylist(), t["data"].to_pylist(), strict=True))


def metadata_listing(table: IcebergTable) -> set[str]:
    return set(os.listdir(table.metadata_dir))


def data_sequence_numbers(table: IcebergTable) -> dict[str, int | None]:
    snap = table.refresh().current_snapshot()
    assert snap is not None
    out = {}
    for m in read_manifest_list(table.io, snap.manifest_list):
        for e in read_manifest(table.io, m):
            if e.is_live:
                out[e.data_file.file_path] = e.sequence_number
    return out


def test_rewrite_replaces_files_keeps_rows_and_takes_the_starting_sequence_number(
    table: IcebergTable,
) -> None:
    table.append(rows((1, "a"), (2, "b")))
    table.upsert(rows((2, "B"), (3, "c")))
    plan = plan_compaction(table)
    snap = commit_compaction(table, plan, use_starting_sequence_number=True)
    assert snap.operation == "replace"
    assert read(table) == [(1, "a"), (2, "B"), (3, "c")]
    live = live_files(table, snap)
    assert {f.file_path for f in live} == {f.file_path for f in plan.new_files}
    assert all(f.content == DataFileContent.DATA for f in live)  # deletes applied, dropped
    seqs = data_sequence_numbers(table)
    assert set(seqs.values()) == {plan.snapshot.sequence_number}
    assert snap.sequence_number > plan.snapshot.sequence_number
    assert snap.summary["deleted-data-files"] == str(len(plan.data_files))
    assert snap.summary["removed-delete-files"] == str(len(plan.delete_files))


def test_rewrite_without_starting_sequence_number_gets_the_new_one(table: IcebergTable) -> None:
    table.append(rows((1, "a")))
    table.append(rows((2, "b")))
    plan = plan_compaction(table)
    snap = commit_compaction(table, plan, use_starting_sequence_number=False)
    assert set(data_sequence_numbers(table).values()) == {snap.sequence_number}
    assert read(table) == [(1, "a"), (2, "b")]


def test_second_identical_rewrite_is_refused_and_leaves_no_metadata(table: IcebergTable) -> None:
    table.append(rows((1, "a")))
    table.append(rows((2, "b")))
    first, second = plan_compaction(table), plan_compaction(table)
    commit_compaction(table, first, use_starting_sequence_number=True)
    before, head = metadata_listing(table), table.current_snapshot()
    with pytest.raises(CommitValidationError, match="no longer live"):
        commit_compaction(table, second, use_starting_sequence_number=True)
    assert metadata_listing(table) == before
    assert table.refresh().current_snapshot() == head
    # the refused rewrite's data files are the caller's to delete
    assert all(os.path.exists(f.file_path) for f in second.new_files)
    assert read(table) == [(1, "a"), (2, "b")]


def test_new_position_delete_conflicts_even_with_the_starting_sequence_number(
    table: IcebergTable,
) -> None:
    table.append(rows((1, "a"), (2, "b")))
    plan = plan_compaction(table)
    # a concurrent delete by position of a row in the replaced file
    data = plan.data_files[0]
    pos = _position_delete(table, data.file_path, 0)
    table.new_row_delta().add_deletes(pos).commit()
    before = metadata_listing(table)
    with pytest.raises(CommitValidationError, match="position delete"):
        commit_compaction(table, plan, use_starting_sequence_number=True)
    assert metadata_listing(table) == before
    assert read(table) == [(2, "b")]


def test_equality_delete_outside_the_replaced_files_bounds_does_not_conflict(
    table: IcebergTable,
) -> None:
    table.append(rows((1, "a"), (2, "b")))
    plan = plan_compaction(table)
    table.upsert(rows((9, "z")))  # equality delete of key 9: bounds [9, 9], file holds [1, 2]
    commit_compaction(table, plan, use_starting_sequence_number=False)
    assert read(table) == [(1, "a"), (2, "b"), (9, "z")]


def test_rewrite_arguments_are_checked(table: IcebergTable) -> None:
    table.append(rows((1, "a")))
    plan = plan_compaction(table)
    with pytest.raises(ValidationError, match="must remove"):
        table.new_rewrite().commit()
    with pytest.raises(ValidationError, match="takes a data file"):
        table.new_rewrite().rewrite_files(plan.data_files, [_position_delete(table, "x", 0)])
    with pytest.raises(ValidationError, match="above the last sequence number"):
        table.new_rewrite().rewrite_files(plan.data_files, plan.new_files).data_sequence_number(
            99
        ).commit()


def test_files_of_an_older_partition_spec_keep_their_spec(tmp_path: Path) -> None:
    catalog = load_catalog("rw", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    t = catalog.create_table("db.p", ARROW, [("bucket", "id", 4)])
    t.append(rows((1, "a"), (2, "b"), (3, "c")))
    old_spec = t.spec()
    from stream_sink.table.partitioning import PartitionSpec

    meta = t.metadata.with_spec(PartitionSpec(0, ()))
    t.catalog.commit_metadata(t.identifier, t.metadata_location, meta, base_metadata=t.metadata)
    t.refresh()
    old = live_files(t, t.current_snapshot())  # type: ignore[arg-type]
    factory = TaskWriterFactory.for_table(t)
    factory = replace(factory, spec=old_spec.bind(factory.schema))
    writer = factory.create(0, 0)
    writer.write(rows((1, "a"), (2, "b"), (3, "c")))
    new = writer.complete().data_files
    t.new_rewrite().rewrite_files(old, new).commit()
    specs = {
        m.partition_spec_id
        for m in read_manifest_list(t.io, t.refresh().current_snapshot().manifest_list)
    }  # type: ignore[union-attr]
    assert specs == {old_spec.spec_id}
    assert read(t) == [(1, "a"), (2, "b"), (3, "c")]


def _position_delete(table: IcebergTable, path: str, pos: int):  # type: ignore[no-untyped-def]
    import pyarrow.parquet as pq

    from stream_sink.table.manifest import DataFile, FileFormat

    out = f"{table.data_location}/pos-{os.urandom(6).hex()}.parquet"
    schema = pa.schema(
        [
            pa.field(
                "file_path",
                pa.string(),
                nullable=False,
                metadata={b"PARQUET:field_id": b"2147483546"},
            ),
            pa.field(
                "pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": b"2147483545"}
            ),
        ]
    )
    pq.write_table(pa.table({"file_path": [path], "pos": [pos]}, schema=schema), out)
    raw = path.encode()
    return DataFile(
        content=DataFileContent.POSITION_DELETES,
        file_path=out,
        file_format=FileFormat.PARQUET,
        spec_id=table.spec().spec_id,
        partition=(),
        record_count=1,
        file_size_in_bytes=os.path.getsize(out),
        lower_bounds={2147483546: raw},
        upper_bounds={2147483546: raw},
    )


def test_corrupt_manifest_met_by_a_rewrite_is_named_and_changes_nothing(
    table: IcebergTable,
) -> None:
    from stream_sink.exceptions import CorruptMetadataError

    table.append(rows((1, "a")))
    table.append(rows((2, "b")))
    plan = plan_compaction(table)
    head = table.current_snapshot()
    assert head is not None
    manifest = read_manifest_list(table.io, head.manifest_list)[0].manifest_path
    Path(manifest).write_bytes(b"Obj\x01garbage")
    before = metadata_listing(table)
    with pytest.raises(CorruptMetadataError, match=os.path.basename(manifest)):
        commit_compaction(table, plan, use_starting_sequence_number=True)
    assert metadata_listing(table) == before
    assert table.refresh().current_snapshot() == head

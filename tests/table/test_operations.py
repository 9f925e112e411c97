"""Commit operations: one snapshot each, the right manifests, totals, retries and hooks.

Tests stream_sink.table.operations: the commit operations.
Tests stream_sink.table.summary: their snapshot summaries and running totals."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stream_sink.exceptions import (
    CommitFailedError,
    CommitStateUnknownError,
    CommitValidationError,
    ValidationError,
)
from stream_sink.table.catalog import Catalog, HadoopCatalog
from stream_sink.table.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntryStatus,
    read_manifest,
    read_manifest_list,
)
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.table import Table

SCHEMA = pa.schema([("id", pa.int64()), ("cat", pa.string())])


@pytest.fixture
def catalog(hadoop_catalog: Catalog) -> Catalog:
    return hadoop_catalog


def data_file(table: Table, rows: list[tuple[int, str]], partition: tuple = ()) -> DataFile:
    path = f"{table.data_location}/{uuid.uuid4()}.parquet"
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": [r[0] for r in rows], "cat": [r[1] for r in rows]}), path)
    return DataFile(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        spec_id=table.spec().spec_id,
        partition=partition,
        record_count=len(rows),
        file_size_in_bytes=Path(path).stat().st_size,
    )


def eq_delete_file(table: Table, ids: list[int]) -> DataFile:
    path = f"{table.data_location}/{uuid.uuid4()}-eq.parquet"
    pq.write_table(pa.table({"id": ids}), path)
    return DataFile(
        content=DataFileContent.EQUALITY_DELETES,
        file_path=path,
        file_format=FileFormat.PARQUET,
        spec_id=table.spec().spec_id,
        partition=(),
        record_count=len(ids),
        file_size_in_bytes=Path(path).stat().st_size,
        equality_ids=(1,),
    )


def live_files(table: Table) -> dict[str, tuple[int, int | None]]:
    """Live file path → (status, data sequence number) of the current snapshot."""
    snap = table.current_snapshot()
    assert snap is not None
    out = {}
    for m in read_manifest_list(table.io, snap.manifest_list):
        ptype = table.metadata.spec_by_id(m.partition_spec_id).partition_type(table.schema())
        for e in read_manifest(table.io, m, ptype):
            if e.status != ManifestEntryStatus.DELETED:
                out[e.data_file.file_path] = (int(e.status), e.sequence_number)
    return out


def metadata_files(table: Table) -> set[str]:
    return {p.name for p in Path(table.metadata_dir).iterdir()}


def test_fast_append_keeps_manifests_and_counts_totals(catalog: Catalog) -> None:
    t = catalog.create_table("db.t", SCHEMA)
    a = data_file(t, [(1, "a"), (2, "b")])
    s1 = t.new_fast_append().append_file(a).set("app", "x").commit()
    b = data_file(t, [(3, "c")])
    s2 = t.new_fast_append().append_file(b).commit()
    assert s1.summary["total-records"] == "2" and s1.summary["app"] == "x"
    assert s2.summary["added-records"] == "1"
    assert s2.summary["total-records"] == "3"
    assert s2.summary["total-data-files"] == "2"
    assert s2.parent_snapshot_id == s1.snapshot_id
    assert s2.sequence_number == s1.sequence_number + 1
    assert len(read_manifest_list(t.io, s2.manifest_list)) == 2
    files = live_files(catalog.load_table("db.t"))
    assert files == {a.file_path: (1, 1), b.file_path: (1, 2)}


def test_merge_append_rewrites_small_manifests_keeping_sequence_numbers(catalog: Catalog) -> None:
    t = catalog.create_table("db.t", SCHEMA, properties={"commit.manifest.min-count-to-merge": "3"})
    paths = []
    for i in range(3):
        f = data_file(t, [(i, "x")])
        paths.append(f.file_path)
        t.new_append().append_file(f).commit()
    snap = t.current_snapshot()
    assert snap is not None
    manifests = read_manifest_list(t.io, snap.manifest_list)
    assert len(manifests) == 1, "the third commit reaches min-count-to-merge"
    files = live_files(t)
    assert sorted(files) == sorted(paths)
    # merged older files keep the sequence number of the commit that added them
    assert [files[p][1] for p in paths] == [1, 2, 3]
    assert files[paths[2]][0] == int(ManifestEntryStatus.ADDED)
    assert files[paths[0]][0] == int(ManifestEntryStatus.EXISTING)


def test_row_delta_adds_data_and_delete_manifests(catalog: Catalog) -> None:
    t = catalog.create_table("db.t", SCHEMA)
    t.new_fast_append().append_file(data_file(t, [(1, "a"), (2, "b")])).commit()
    delta = t.new_row_delta().add_rows(data_file(t, [(2, "B")])).add_deletes(eq_delete_file(t, [2]))
    s = delta.commit()
    assert s.operation == "overwrite"
    assert s.summary["added-equality-deletes"] == "1"
    assert s.summary["total-equality-deletes"] == "1"
    assert s.summary["total-delete-files"] == "1"
    contents = sorted(int(m.content) for m in read_manifest_list(t.io, s.manifest_list))
    assert contents == [
        int(ManifestContent.DATA),
        int(ManifestContent.DATA),
        int(ManifestContent.DELETES),
    ]
    with pytest.raises(ValidationError, match="cannot take DATA"):
        t.new_row_delta().add_deletes(data_file(t, [(9, "z")]))


def test_replace_partitions_drops_only_touched_partitions(catalog: Catalog) -> None:
    t = catalog.create_table("db.t", SCHEMA, partition_spec=[("identity", "cat")])
    a = data_file(t, [(1, "a")], ("a",))
    b = data_file(t, [(2, "b")], ("b",))
    t.new_fast_append().append_files([a, b]).commit()
    a2 = data_file(t, [(3, "a")], ("a",))
    s = t.new_replace_partitions().add_file(a2).commit()
    assert s.operation == "overwrite"
    assert s.summary["deleted-data-files"] == "1"
    assert s.summary["total-records"] == "2"
    assert set(live_files(t)) == {b.file_path, a2.file_path}


def test_overwrite_files_rewrites_and_refuses_unknown_files(catalog: Catalog) -> None:
    t = catalog.create_table("db.t", SCHEMA)
    a = data_file(t, [(1, "a")])
    b = data_file(t, [(2, "b")])
    t.new_fast_append().append_files([a, b]).commit()
    c = data_file(t, [(1, "a"), (2, "b")])
    s = t.new_overwrite().delete_file(a).delete_file(b).add_file(c).commit()
    assert set(live_files(t)) == {c.file_path}
    assert s.summary["total-data-files"] == "1"
    before = t.current_snapshot()
    with pytest.raises(CommitValidationError, match="not in table"):
        t.new_overwrite().delete_file("/nowhere.parquet").commit()
    assert t.refresh().current_snapshot() == before


def test_stale_handle_retries_and_both_commits_land(catalog: Catalog) -> None:
    t1 = catalog.create_table("db.t", SCHEMA)
    t2 = catalog.load_table("db.t")
    a = data_file(t1, [(1, "a")])
    b = data_file(t2, [(2, "b")])
    t1.new_fast_append().append_file(a).commit()
    s = t2.new_fast_append().append_file(b).commit()  # t2 was stale: refresh, then commit
    assert s.summary["total-records"] == "2"
    assert set(live_files(catalog.load_table("db.t"))) == {a.file_path, b.file_path}


def test_validation_failure_is_final_and_leaves_no_files(catalog: Catalog) -> None:
    t = catalog.create_table("db.t", SCHEMA)
    before = metadata_files(t)

    def refuse(meta: TableMetadata, head: object) -> None:
        raise CommitValidationError("watermark moved")

    with pytest.raises(CommitValidationError, match="watermark moved"):
        t.new_fast_append().append_file(data_file(t, [(1, "a")])).validate(refuse).commit()
    assert t.refresh().current_snapshot() is None
    assert metadata_files(t) == before


class FlakyCatalog(HadoopCatalog):
    """A real Hadoop catalog whose swap fails the first ``fail`` times with ``error``."""

    def __init__(self, warehouse: str, error: type[Exception], fail: int) -> None:
        super().__init__("flaky", warehouse, {}, None)
        self.error, self.fail, self.calls = error, fail, 0

    def commit_metadata(self, identifier, base_location, new_metadata, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.calls <= self.fail:
            raise self.error("injected")
        return super().commit_metadata(identifier, base_location, new_metadata, *args, **kwargs)


def test_lost_race_is_retried_and_its_files_removed(tmp_path: Path) -> None:
    cat = FlakyCatalog(str(tmp_path / "wh"), CommitFailedError, fail=2)
    cat.create_namespace("db")
    t = cat.create_table("db.t", SCHEMA, properties={"commit.retry.min-wait-ms": "1"})
    before = metadata_files(t)
    s = t.new_fast_append().append_file(data_file(t, [(1, "a")])).commit()
    assert cat.calls == 3
    written = metadata_files(t) - before
    # one manifest, one manifest list, one metadata file: nothing left from lost attempts
    assert s.manifest_list.rsplit("/", 1)[1] in written
    assert len([n for n in written if n.startswith("snap-")]) == 1
    assert len([n for n in written if n.endswith(".avro") and not n.startswith("snap-")]) == 1


def test_retries_stop_at_num_retries(tmp_path: Path) -> None:
    cat = FlakyCatalog(str(tmp_path / "wh"), CommitFailedError, fail=10)
    cat.create_namespace("db")
    props = {"commit.retry.num-retries": "1", "commit.retry.min-wait-ms": "1"}
    t = cat.create_table("db.t", SCHEMA, properties=props)
    with pytest.raises(CommitFailedError):
        t.new_fast_append().append_file(data_file(t, [(1, "a")])).commit()
    assert cat.calls == 2


def test_unknown_commit_state_is_not_retried_nor_cleaned(tmp_path: Path) -> None:
    cat = FlakyCatalog(str(tmp_path / "wh"), CommitStateUnknownError, fail=1)
    cat.create_namespace("db")
    t = cat.create_table("db.t", SCHEMA)
    before = metadata_files(t)
    with pytest.raises(CommitStateUnknownError):
        t.new_fast_append().append_file(data_file(t, [(1, "a")])).commit()
    assert cat.calls == 1
    assert any(n.startswith("snap-") for n in metadata_files(t) - before)


def test_branch_commits_fork_from_main_and_leave_main_alone(catalog: Catalog) -> None:
    t = catalog.create_table("db.t", SCHEMA)
    main = t.new_fast_append().append_file(data_file(t, [(1, "a")])).commit()
    audit = t.new_fast_append(branch="audit").append_file(data_file(t, [(2, "b")])).commit()
    t.refresh()
    assert t.current_snapshot() == main
    assert audit.parent_snapshot_id == main.snapshot_id
    assert t.snapshot_for_ref("audit") == audit
    assert audit.summary["total-records"] == "2"

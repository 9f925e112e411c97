"""Orphan cleanup deletes only files no metadata reaches, and never a file a sink has
written or staged but not committed: staging manifests and what they list always, a
pending batch's files by age or when the sink names them.

Tests stream_sink.io.locations: file locations compared across spellings of a scheme.
Tests stream_sink.maintenance.reachable: the files a table's metadata reaches.
Tests stream_sink.table.reachable: its metadata files, manifests and data files."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from maint_support import make_cdc_table, ours, to_arrow

from stream_sink.commit import FilesCommitter, IcebergTarget, StateDirectory
from stream_sink.exceptions import ValidationError
from stream_sink.table.catalog import Catalog
from stream_sink.table.table import Table
from stream_sink.write.result import WriteResult
from stream_sink.write.writer_factory import TaskWriterFactory

DAY_MS = 86_400_000


def _age_everything(root: str, days: int) -> None:
    old = time.time() - days * 86400
    for d, _, names in os.walk(root):
        for n in names:
            os.utime(os.path.join(d, n), (old, old))


def _batch(table: Table, rows: list[tuple[int, str, int]]) -> WriteResult:
    factory = TaskWriterFactory.for_table(table, equality_fields=["id"], upsert=True)
    writer = factory.create(0, 0)
    writer.write(to_arrow([("+I", r) for r in rows]))
    return writer.complete()


def _sink_with_uncommitted(
    tmp_path: Path, table: Table
) -> tuple[FilesCommitter, set[str], set[str]]:
    """A committer holding batch 0 staged (checkpointed, not committed) and batch 1 pending;
    the staged and the pending files."""
    state = StateDirectory(str(tmp_path / "state"), kind="memory")
    committer = FilesCommitter(IcebergTarget(table), state, None, job_id="job", operator_id="sink")
    committer.restore()
    staged, pending = _batch(table, [(1000, "s", 1)]), _batch(table, [(1001, "p", 2)])
    committer.process(0, staged)
    committer.snapshot_state(0)
    committer.process(1, pending)
    return committer, set(staged.all_paths()), set(pending.all_paths())


def test_orphans_go_uncommitted_files_stay(catalog: Catalog, tmp_path: Path) -> None:
    cdc = make_cdc_table(catalog, "db.t", batches=5, rows=20, seed=7)
    table = cdc.table
    table.maintenance.rewrite_data_files(min_input_files=2)  # old files stay reachable
    committer, staged, pending = _sink_with_uncommitted(tmp_path, catalog.load_table("db.t"))
    junk = [f"{table.data_location}/junk-{i}.parquet" for i in range(3)]
    junk.append(f"{table.metadata_dir}/junk.avro")
    for j in junk:
        Path(j).write_bytes(b"x" * 10)
    _age_everything(table.location, days=10)

    uncommitted = staged | pending

    # a pending batch lives only in the sink's state: at 10 days old, an engine that cannot
    # read that state sees its files as orphans; staged ones are kept by their manifests
    dry = table.maintenance.remove_orphan_files(dry_run=True)
    assert sorted(dry.orphans) == sorted([*junk, *pending]) and dry.deleted == 0
    assert all(os.path.exists(j) for j in junk)

    # the sink names its files: everything it holds stays
    result = table.maintenance.remove_orphan_files(protected=committer.uncommitted_paths())
    assert sorted(result.orphans) == sorted(junk) and result.deleted == len(junk)
    assert not any(os.path.exists(j) for j in junk)
    assert all(os.path.exists(p) for p in uncommitted)
    assert ours(table) == cdc.expected()

    # young files are kept by age (default: older than 3 days)
    for p in pending:
        os.utime(p, None)
    assert table.maintenance.remove_orphan_files().orphans == ()
    assert all(os.path.exists(p) for p in uncommitted)

    # what was staged and pending commits and reads back exactly
    committer.snapshot_state(1)
    committer.notify_checkpoint_complete(1)
    committer.close()
    got = ours(table)
    assert (1000, "s", 1) in got and (1001, "p", 2) in got
    assert len(got) == len(cdc.expected()) + 2


def _age_dirs(root: str, days: int) -> None:
    """Directories below ``root`` (deepest first, so a parent's age sticks) ``days`` old."""
    old = time.time() - days * 86400
    for d, _, _ in os.walk(root, topdown=False):
        os.utime(d, (old, old))


def test_empty_directories_of_the_data_location_go_once_old(
    catalog: Catalog, tmp_path: Path
) -> None:
    """Each Spark-route batch writes into a directory of its own; once compaction and
    expiry removed its files, orphan cleanup removes the directory (at the file age
    limit), never one holding a file, never a young one."""
    cdc = make_cdc_table(catalog, "db.t", batches=3, rows=20, seed=3)
    table = cdc.table
    data = table.data_location
    emptied = [f"{data}/job1-4-0a1b2c3d/__ss_p0=1", f"{data}/job1-5-1b2c3d4e/_temporary/0"]
    young = f"{data}/job1-6-2c3d4e5f"
    holding = f"{data}/job1-7-3d4e5f6a"
    for d in [*emptied, young, holding]:
        os.makedirs(d)
    Path(f"{holding}/part-00000.parquet").write_bytes(b"not reachable, but young")
    _age_dirs(data, days=10)
    os.utime(young, None)
    os.utime(f"{holding}/part-00000.parquet", None)

    dry = table.maintenance.remove_orphan_files(dry_run=True)
    gone = sorted([*emptied, *(d.rsplit("/", 1)[0] for d in emptied), f"{data}/job1-5-1b2c3d4e"])
    assert sorted(dry.empty_dirs) == gone
    assert all(os.path.isdir(d) for d in emptied)

    result = table.maintenance.remove_orphan_files()
    assert sorted(result.empty_dirs) == gone and result.orphans == ()
    assert not any(os.path.exists(d) for d in gone)
    assert os.path.isdir(young) and os.path.exists(f"{holding}/part-00000.parquet")
    assert os.path.isdir(data)
    assert ours(table) == cdc.expected()


def _respelled_copy(table: Table, spell: Callable[[str], str]) -> tuple[str, str]:
    """A copy of a live data file committed under ``spell``'s spelling of its location:
    (the location as listed, the location the metadata names)."""
    live = next(e.data_file for e in live_entries(table) if "/copy-" not in e.path)
    copy = f"{live.file_path.rsplit('/', 1)[0]}/copy-{uuid.uuid4().hex[:8]}.parquet"
    table.io.write_bytes(copy, table.io.read_bytes(live.file_path))
    table.new_append().append_file(replace(live, file_path=spell(copy))).commit()
    return copy, spell(copy)


def live_entries(table: Table) -> list[Any]:
    from stream_sink.maintenance.inventory import inventory

    return list(inventory(table.refresh(), table.current_snapshot()).data)


def test_a_file_the_metadata_spells_file_uri_is_live(catalog: Catalog) -> None:
    """``/x``, ``file:/x`` and ``file:///x`` are one file (Java's writers give
    ``file:/``): neither the data file nor the metadata is an orphan."""
    cdc = make_cdc_table(catalog, "db.t", batches=2, rows=10, seed=5)
    table = cdc.table
    spelled = [
        _respelled_copy(table, lambda p: f"file:{p}"),
        _respelled_copy(table, lambda p: f"file://{p}"),
    ]
    _age_everything(table.location, days=10)
    result = table.maintenance.remove_orphan_files()
    assert result.orphans == () and result.deleted == 0
    assert all(os.path.exists(listed) for listed, _ in spelled)
    assert ours(table.refresh())  # every file the metadata names is still there


def test_another_authority_for_a_listed_path_stops_the_run(catalog: Catalog) -> None:
    """The metadata names a listed file's path on another host: whether the listed
    file is an orphan cannot be told, so nothing is deleted, not even true orphans."""
    cdc = make_cdc_table(catalog, "db.t", batches=2, rows=10, seed=6)
    table = cdc.table
    listed, _ = _respelled_copy(table, lambda p: f"file://otherhost{p}")
    junk = f"{table.data_location}/junk.parquet"
    Path(junk).write_bytes(b"x")
    _age_everything(table.location, days=10)
    with pytest.raises(ValidationError, match="nothing deleted") as info:
        table.maintenance.remove_orphan_files()
    assert listed in str(info.value) and "file://otherhost" in str(info.value)
    assert os.path.exists(listed) and os.path.exists(junk)


def test_a_staging_root_outside_the_table_is_never_deleted_from(
    catalog: Catalog, tmp_path: Path
) -> None:
    """``stream-sink.manifests.location`` aimed at another team's data: none of it is
    listed or deleted; a staging manifest there still keeps the files it lists."""
    cdc = make_cdc_table(catalog, "db.t", batches=2, rows=10, seed=8)
    table = cdc.table
    other = tmp_path / "other_team" / "warehouse" / "finance" / "ledger"
    (other / "data").mkdir(parents=True)
    ledger = other / "data" / "part-00000.parquet"
    ledger.write_bytes(b"the ledger")
    named_like_ours = other / "job-sink-1-1-0a1b2c3d-00001.avro"
    named_like_ours.write_bytes(b"not a manifest")
    table.catalog.commit(
        table.identifier,
        table.metadata_location,
        table.metadata.with_properties({"stream-sink.manifests.location": str(other)}),
    )
    committer, staged, pending = _sink_with_uncommitted(tmp_path, catalog.load_table("db.t"))
    _age_everything(str(tmp_path), days=10)

    result = table.refresh().maintenance.remove_orphan_files()
    assert ledger.exists() and named_like_ours.exists()
    assert not [o for o in result.orphans if o.startswith(str(other))]
    assert sorted(result.orphans) == sorted(pending)  # staged files kept by their manifest
    assert all(os.path.exists(p) for p in staged)
    committer.close()


@pytest.mark.slow
def test_s3a_in_the_metadata_is_the_s3_file_listed(
    s3_props: dict[str, str], tmp_path: Path
) -> None:
    """Spark's and Hadoop's writers name ``s3a://`` files of an ``s3://`` table (on a
    real S3 server): they are live, not orphans."""
    from stream_sink.catalogs import load_catalog

    catalog = load_catalog(
        "s3",
        type="sql",
        uri=f"sqlite:///{tmp_path / 'catalog.db'}",
        warehouse=f"s3://lake/orphans-{uuid.uuid4().hex[:8]}",
        **s3_props,
    )
    catalog.create_namespace("db")
    cdc = make_cdc_table(catalog, "db.t", batches=2, rows=10, seed=9)
    table = cdc.table
    listed, named = _respelled_copy(table, lambda p: "s3a://" + p.removeprefix("s3://"))
    assert named.startswith("s3a://") and listed.startswith("s3://")
    junk = f"{table.data_location}/junk.parquet"
    table.io.write_bytes(junk, b"x")
    result = table.maintenance.remove_orphan_files(older_than_ms=int(time.time() * 1000) + 60_000)
    assert result.orphans == (junk,)
    assert table.io.exists(listed) and not table.io.exists(junk)
    assert ours(table.refresh())  # every file the metadata names is still there

"""Orphan cleanup deletes only files no metadata reaches, and never a file a sink has
written or staged but not committed: staging manifests and what they list always, a
pending batch's files by age or when the sink names them."""

from __future__ import annotations

import os
import time
from pathlib import Path

from maint_support import make_cdc_table, ours, to_arrow

from stream_sink.commit import FilesCommitter, IcebergTarget, StateDirectory
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

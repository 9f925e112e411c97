"""Two OS processes append real data (``table.append``) to one table at once, on every
catalog: every append lands exactly once, as its own snapshot, and the losers of
each commit race retried instead of failing or committing twice.

Each process appends batches of ids no other batch has, so the table's rows prove
which appends landed and that none landed twice; the snapshot chain and its
totals prove each is one snapshot; the data directory holds exactly the files
the table references (a retry reuses the files it wrote, nothing is orphaned).
"""

from __future__ import annotations

import multiprocessing as mp
import uuid
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import stream_sink
from stream_sink.exceptions import CommitFailedError
from stream_sink.table.manifest import read_manifest
from stream_sink.table.manifest_list import read_manifest_list
from stream_sink.table.table import Table

pytestmark = pytest.mark.slow  # racing processes

CATALOG_KINDS = ["hadoop", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
WORKERS = 2
APPENDS = 10
ROWS = 50
ARROW = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("worker", pa.int32()),
        pa.field("payload", pa.string()),
    ]
)
# generous retries with short waits: both processes commit back to back on purpose
RETRY = {
    "commit.retry.num-retries": "40",
    "commit.retry.min-wait-ms": "5",
    "commit.retry.max-wait-ms": "200",
}


def batch(worker: int, n: int) -> pa.Table:
    start = (worker * APPENDS + n) * ROWS
    ids = list(range(start, start + ROWS))
    return pa.table(
        {"id": ids, "worker": [worker] * ROWS, "payload": [f"w{worker}-a{n}-é{i}" for i in ids]},
        schema=ARROW,
    )


def worker(options: dict[str, str], worker_id: int, start: Barrier, out: Queue) -> None:
    """Append APPENDS batches; put on ``out`` how many commit attempts lost a race
    (counted where the catalog reports it; the append retries them itself)."""
    catalog = stream_sink.load_catalog(**options)  # type: ignore[arg-type]
    lost = 0
    swap = catalog.commit_metadata

    def counting_commit(*args: Any, **kwargs: Any) -> tuple[str, Any]:
        nonlocal lost
        try:
            return swap(*args, **kwargs)
        except CommitFailedError:
            lost += 1
            raise

    catalog.commit_metadata = counting_commit  # type: ignore[method-assign]
    table = catalog.load_table("db.t")
    _warm_up(table)
    start.wait()
    for n in range(APPENDS):
        table.append(batch(worker_id, n))  # type: ignore[attr-defined]
    catalog.close()
    out.put(lost)


def _warm_up(table: Table) -> None:
    """Load the write path (imports, Parquet) without committing, so that both
    processes are appending from the first batch on, not importing."""
    from stream_sink.write.writer_factory import TaskWriterFactory

    writer = TaskWriterFactory.for_table(table).create(partition_id=0, task_id=0)
    writer.write(batch(0, 0))
    writer.complete()
    writer.abort()


def catalog_options(kind: str, root: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    name = f"appends_{uuid.uuid4().hex[:10]}"
    warehouse = str(root / "warehouse")
    if kind == "hadoop":
        return {"name": name, "type": "hadoop", "warehouse": warehouse}
    if kind == "sqlite":
        return {
            "name": name,
            "type": "sql",
            "uri": f"sqlite:///{root}/catalog.db",
            "warehouse": warehouse,
        }
    return {
        "name": name,
        "type": "sql",
        "uri": request.getfixturevalue("postgres_url"),
        "warehouse": warehouse,
    }


def referenced_files(table: Table) -> list[str]:
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return [
        e.data_file.file_path
        for m in read_manifest_list(table.io, snapshot.manifest_list)
        for e in read_manifest(table.io, m)
        if e.is_live
    ]


@pytest.mark.parametrize("kind", CATALOG_KINDS)
def test_racing_appends_each_land_once(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    options = catalog_options(kind, tmp_path, request)
    catalog = stream_sink.load_catalog(**options)  # type: ignore[arg-type]
    catalog.create_namespace("db")
    catalog.create_table("db.t", ARROW, properties=RETRY)

    ctx = mp.get_context("spawn")
    start = ctx.Barrier(WORKERS)
    out: Queue = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(options, w, start, out)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    assert [p.exitcode for p in procs] == [0] * WORKERS
    lost = sum(out.get(timeout=5) for _ in procs)

    table = catalog.load_table("db.t")
    snapshots = table.snapshots()
    assert len(snapshots) == WORKERS * APPENDS  # one snapshot per append, none twice
    assert [s.parent_snapshot_id for s in snapshots[1:]] == [s.snapshot_id for s in snapshots[:-1]]
    assert {s.summary["added-records"] for s in snapshots} == {str(ROWS)}
    assert snapshots[-1].summary["total-records"] == str(WORKERS * APPENDS * ROWS)

    rows = table.scan().to_arrow()  # type: ignore[attr-defined]
    assert sorted(rows.column("id").to_pylist()) == list(range(WORKERS * APPENDS * ROWS))
    expected = pa.concat_tables(batch(w, n) for w in range(WORKERS) for n in range(APPENDS))
    assert rows.sort_by("id").equals(expected.sort_by("id"))

    files = referenced_files(table)
    on_disk = sorted(str(p) for p in (Path(table.location) / "data").rglob("*.parquet"))
    assert sorted(files) == on_disk and len(files) == WORKERS * APPENDS
    assert lost >= 1, "two processes committing back to back never lost a race"
    catalog.close()

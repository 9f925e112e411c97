"""Two OS processes commit to one table at once, on every catalog: each commit
lands exactly once, and the losers of each race get CommitFailedError and retry.

Each commit adds one table property (a metadata-only change), so the final
metadata proves which commits landed: every property is there, and the
metadata log holds one entry per commit.
"""

from __future__ import annotations

import multiprocessing as mp
import re
import uuid
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

import stream_sink
from stream_sink.exceptions import CommitFailedError
from stream_sink.table.schema import Schema
from stream_sink.table.types import LongType, NestedField

pytestmark = pytest.mark.slow  # racing processes

CATALOG_KINDS = ["hadoop", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
COMMITS_PER_WORKER = 12
WORKERS = 2


def worker(options: dict[str, str], worker_id: int, start: Barrier, out: Queue) -> None:
    """Commit COMMITS_PER_WORKER property updates, refreshing and retrying on lost races;
    puts how many races were lost on ``out``. The first attempt of every worker starts
    from the same base, so at least one race is lost."""
    catalog = stream_sink.load_catalog(**options)  # type: ignore[arg-type]
    lost = 0
    table = catalog.load_table("db.t")
    start.wait()
    for i in range(COMMITS_PER_WORKER):
        while True:
            new = table.metadata.with_properties({f"w{worker_id}-{i}": "done"})
            try:
                catalog.commit(
                    table.identifier, table.metadata_location, new, base_metadata=table.metadata
                )
                break
            except CommitFailedError:
                lost += 1
                table = catalog.load_table("db.t")
        table = catalog.load_table("db.t")
    catalog.close()
    out.put(lost)


def catalog_options(kind: str, root: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    name = f"conc_{uuid.uuid4().hex[:10]}"
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


@pytest.mark.parametrize("kind", CATALOG_KINDS)
def test_racing_processes_each_commit_lands_once(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    options = catalog_options(kind, tmp_path, request)
    catalog = stream_sink.load_catalog(**options)  # type: ignore[arg-type]
    catalog.create_namespace("db")
    created = catalog.create_table("db.t", Schema(NestedField(1, "id", LongType())))

    ctx = mp.get_context("spawn")
    start = ctx.Barrier(WORKERS)
    out: Queue = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(options, w, start, out)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    assert [p.exitcode for p in procs] == [0] * WORKERS
    lost = [out.get(timeout=5) for _ in procs]

    table = catalog.load_table("db.t")
    expected = {f"w{w}-{i}" for w in range(WORKERS) for i in range(COMMITS_PER_WORKER)}
    assert expected <= set(table.properties)
    log = [str(e.value) for e in table.metadata.metadata_log]
    assert len(log) == WORKERS * COMMITS_PER_WORKER  # one entry per commit, none twice
    assert len(set(log)) == len(log) and log[0] == created.metadata_location
    assert sum(lost) >= 1, "the first commits of both workers share a base: one must lose"

    files = sorted(p.name for p in (Path(table.location) / "metadata").iterdir())
    versions = [f for f in files if f.endswith(".metadata.json")]
    assert len(versions) == WORKERS * COMMITS_PER_WORKER + 1  # losers' files are removed
    if kind == "hadoop":
        assert all(re.fullmatch(r"v\d+\.metadata\.json", f) for f in versions)
        assert (Path(table.location) / "metadata" / "version-hint.text").read_text() == str(
            len(versions)
        )
    catalog.close()

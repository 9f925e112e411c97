"""Delta Lake's own implementation (Delta on Spark, through ``tests/peers/peer``) as the
reference reader: every version of a representative set of the Delta tables we write
(append, overwrite, upsert, changelog, upserts committed as deletion vectors
(``deletes="positions"``), after log checkpoints, after a commit that lost a
race and retried, after a killed writer's leftovers were cleaned and the log before a
checkpoint removed, a table with domain metadata in its commits and checkpoints) reads
the same in Delta Lake as in delta-rs, DuckDB and our own
reader; and tables Delta Lake wrote (its ``MERGE`` and its streaming sink) are read and
appended to by us, then read back by Delta Lake at every version.

Two JVM starts for the whole module: one where Delta Lake writes, one where it reads."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from delta_readers import by_key, delta_rs_query_rows, delta_rs_rows, duckdb_delta_versions
from peers.readers import read_with_delta, sql_with_delta

from stream_sink.commit import FilesCommitter, StateDirectory
from stream_sink.commit.delta.target import DeltaTarget
from stream_sink.delta import CommitInfo, DeltaTable
from stream_sink.delta.actions import DomainMetadata
from stream_sink.delta.batch import DeltaBatch
from stream_sink.delta.key_positions import DeltaPositionResolver, keys_folder, positions_batch
from stream_sink.delta.log import DeltaLog
from stream_sink.delta.log_cleanup import STALE_TEMP_AGE_S
from stream_sink.delta.merge import copy_on_write
from stream_sink.delta.writer import write_data_files

pytestmark = [pytest.mark.interop, pytest.mark.timeout(1800)]  # two JVM starts

UTC = dt.timezone.utc
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("p", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("d", pa.date32()),
        ("x", pa.float64()),
    ]
)


def rows(ids: list[int], p: str = "a b") -> pa.Table:
    return pa.table(
        {
            "id": ids,
            "p": [p] * len(ids),
            "ts": [dt.datetime(2024, 1, 1, 0, 0, 0, 1500 + i, tzinfo=UTC) for i in ids],
            "d": [dt.date(2024, 1, 1 + i % 28) for i in ids],
            "x": [None if i % 3 == 0 else i / 2 for i in ids],
        },
        schema=SCHEMA,
    )


def changes(ids: list[int], ops: list[str], p: str = "x/y") -> pa.Table:
    return rows(ids, p).append_column("op", pa.array(ops))


def commit(table: DeltaTable, state: Path, mode: str, batch_id: int, batch: DeltaBatch) -> None:
    """One batch through the sink's committer (the path every streaming write takes)."""
    c = FilesCommitter(
        DeltaTarget(table.refresh()),
        StateDirectory(str(state), kind="memory", sync=False),
        None,
        job_id="ref",
        operator_id=state.name,  # one sink per state directory
        mode=mode,
    )
    c.restore()
    c.process(batch_id, batch)
    c.snapshot_state(batch_id)
    c.notify_checkpoint_complete(batch_id)
    c.close()


def files(table: DeltaTable, data: pa.Table) -> DeltaBatch:
    t = table.refresh()
    return DeltaBatch(
        tuple(write_data_files(t.location, data, t.schema, t.partition_columns, io=t.io))
    )


def write_modes(loc: str, state: Path) -> None:
    """Versions 0-6: create, append twice, overwrite (the partition ``x/y``), upsert,
    changelog, append; checkpoints at 3 and 6."""
    table = DeltaTable.create(
        loc, SCHEMA, partition_by=["p"], configuration={"delta.checkpointInterval": "3"}
    )
    commit(table, state / "a", "append", 0, files(table, rows([1, 2, 3])))
    commit(table, state / "a", "append", 1, files(table, rows([4, 5], "x/y")))
    commit(table, state / "o", "overwrite", 0, files(table, rows([10, 11, 12], "x/y")))
    upsert = changes([11, 13, 12], ["+U", "+I", "-D"])
    commit(
        table,
        state / "u",
        "append",
        0,
        copy_on_write(table.refresh().snapshot, table.io, upsert, ["id"], "upsert", "op"),
    )
    changelog = changes([10, 13, 14, 14], ["-U", "+U", "+I", "-D"])
    commit(
        table,
        state / "c",
        "append",
        0,
        copy_on_write(table.refresh().snapshot, table.io, changelog, ["id"], "changelog", "op"),
    )
    commit(table, state / "a", "append", 2, files(table, rows([20])))


def write_conflict(loc: str) -> None:
    """Versions 0-3: a commit planned on version 1 loses version 2 to another writer and
    lands as version 3 after its conflict checks."""
    DeltaTable.create(loc, SCHEMA).append(rows([1]))
    mine = DeltaTable.load(loc)
    txn = mine.new_transaction().add_all(write_data_files(loc, rows([2]), SCHEMA, (), io=mine.io))
    assert DeltaTable.load(loc).append(rows([3])) == 2
    assert txn.commit() == 3
    info = DeltaLog(loc).read_commit(3)[0]
    assert isinstance(info, CommitInfo) and info.values["operationMetrics"]["numAttempts"] == "2"


def write_cleaned(loc: str) -> int:
    """Versions 0-5, checkpoints at 2 and 4; an old temporary a killed writer left is
    removed by commit 5; then the log before checkpoint 2 is removed, as log retention
    does. Returns the first version still readable (2)."""
    table = DeltaTable.create(loc, SCHEMA, configuration={"delta.checkpointInterval": "2"})
    for i in range(1, 5):
        table.append(rows([i]))
    left = Path(loc, "_delta_log", f".{5:020d}.json.{'c' * 32}.tmp")
    left.write_bytes(b"{}\n")
    old = time.time() - STALE_TEMP_AGE_S - 60
    os.utime(left, (old, old))
    assert table.append(rows([5])) == 5
    assert not left.exists()
    for v in range(2):
        os.remove(Path(loc, "_delta_log", f"{v:020d}.json"))
    return 2


def write_positions(loc: str, state: Path) -> None:
    """Versions 0-4 of a table with deletion vectors: two appends, then an upsert and a
    changelog batch with ``deletes="positions"`` (vectors only, one vector file per
    commit, the row moved between partitions included); a checkpoint at 3."""
    config = {"delta.enableDeletionVectors": "true", "delta.checkpointInterval": "3"}
    table = DeltaTable.create(loc, SCHEMA, partition_by=["p"], configuration=config)
    commit(table, state / "pa", "append", 0, files(table, rows([1, 2, 3, 4])))
    commit(table, state / "pa", "append", 1, files(table, rows([5, 6], "x/y")))
    folder = keys_folder(loc, "pos")
    for batch_id, (ops, ids, mode) in enumerate(
        [(["+U", "+I", "-D"], [2, 7, 5], "upsert"), (["-U", "+U", "-D"], [1, 1, 6], "changelog")]
    ):
        t = table.refresh()
        c = FilesCommitter(
            DeltaTarget(t, positions=DeltaPositionResolver(["id"]), keys_folder=folder),
            StateDirectory(str(state / "pos"), kind="memory", sync=False),
            None,
            job_id="ref",
            operator_id="pos",
        )
        c.restore()  # sweeps the keys files no staged batch names: the batch's come after
        batch = positions_batch(t.snapshot, t.io, changes(ids, ops), ["id"], mode, folder, "op")
        c.process(batch_id, batch)
        c.snapshot_state(batch_id)
        c.notify_checkpoint_complete(batch_id)
        c.close()


def write_domains(loc: str) -> None:
    """Versions 0-4 of a table with the ``domainMetadata`` feature: each append writes a
    user domain (checkpoints at 2 and 4 carry it), version 3 removes another one."""
    config = {"delta.feature.domainMetadata": "supported", "delta.checkpointInterval": "2"}
    table = DeltaTable.create(loc, SCHEMA, configuration=config)
    for i in range(1, 5):
        txn = table.refresh().new_transaction()
        txn.add_all(write_data_files(loc, rows([i]), SCHEMA, (), io=table.io))
        txn.set_domain("stream-sink.test", lambda v, ts: json.dumps({"version": v}))
        if i == 1:
            txn.set_domain("stream-sink.gone", lambda v, ts: "{}")
        if i == 3:
            txn.add(DomainMetadata("stream-sink.gone", "{}", removed=True))
        assert txn.commit() == i


@dataclass
class World:
    versions: dict[str, list[int]] = field(default_factory=dict)
    delta_wrote: dict[str, pa.Table] = field(default_factory=dict)
    ours_before_append: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    delta_read: dict[str, pa.Table] = field(default_factory=dict)


def delta_lake_writes(root: Path) -> dict[str, pa.Table]:
    """Delta Lake writes ``stream`` (its streaming sink, two commits) and ``merge``
    (CREATE, INSERT, MERGE); returns its own reading of each at its newest version."""
    source = root / "source"
    source.mkdir()
    for i, batch in enumerate([[1, 2], [3]]):
        path = source / f"{i}.json"
        path.write_text("".join(json.dumps({"id": n, "v": f"s{n}"}) + "\n" for n in batch))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    merge = f"delta.`{root / 'merge'}`"
    got = sql_with_delta(
        [
            f"CREATE TABLE {merge} (id BIGINT, p STRING, x DOUBLE) USING delta PARTITIONED BY (p)",
            f"INSERT INTO {merge} VALUES (1, 'a', 0.5), (2, 'b', 1.0), (3, 'a', NULL)",
            f"MERGE INTO {merge} t USING (SELECT * FROM VALUES (2L, 'b', 9.0), "
            "(4L, 'b', 2.0), (3L, 'a', 0.0) AS u(id, p, x)) u ON t.id = u.id "
            "WHEN MATCHED AND u.x = 0.0 THEN DELETE "
            "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
            f"SELECT * FROM {merge}",
            f"SELECT * FROM delta.`{root / 'stream'}`",
        ],
        streams=[(str(source), str(root / "stream"), str(root / "stream-checkpoint"))],
    )
    return {"merge": got[3], "stream": got[4]}  # type: ignore[dict-item]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("delta-reference")
    w = World()
    w.delta_wrote = delta_lake_writes(root)
    for name in ("merge", "stream"):
        table = DeltaTable.load(str(root / name))
        w.ours_before_append[name] = table.to_arrow().to_pylist()
        appended = pa.Table.from_pylist(
            [{"id": 100, "p": "c", "x": 1.5} if name == "merge" else {"id": 100, "v": "ours"}],
            schema=table.schema,
        )
        table.append(appended)
    write_modes(str(root / "modes"), root / "state")
    write_conflict(str(root / "conflict"))
    first = write_cleaned(str(root / "cleaned"))
    write_domains(str(root / "domains"))
    write_positions(str(root / "positions"), root / "state")
    for name in ("merge", "stream", "modes", "conflict", "cleaned", "domains", "positions"):
        newest = DeltaTable.load(str(root / name)).version
        w.versions[str(root / name)] = list(range(first if name == "cleaned" else 0, newest + 1))
    locations = [f"{loc}@{v}" for loc, vs in w.versions.items() for v in vs]
    w.delta_read = dict(zip(locations, read_with_delta(locations), strict=True))
    return w


def test_delta_lake_reads_every_version_as_delta_rs_duckdb_and_we_do(world: World) -> None:
    for loc, versions in world.versions.items():
        ours = DeltaTable.load(loc)
        duck = duckdb_delta_versions(loc, versions)
        for v, duck_rows in zip(versions, duck, strict=True):
            want = by_key(ours.to_arrow(version=v).to_pylist(), "id")
            assert by_key(world.delta_read[f"{loc}@{v}"].to_pylist(), "id") == want, (loc, v)
            vectors = loc.endswith("positions")  # delta-rs applies them in its query engine
            got = delta_rs_query_rows(loc, v) if vectors else delta_rs_rows(loc, v)
            assert by_key(got, "id") == want, (loc, v)
            assert by_key(duck_rows, "id") == want, (loc, v)


def test_the_modes_leave_what_delta_lake_reads(world: World) -> None:
    (loc,) = (loc for loc in world.versions if loc.endswith("modes"))
    assert world.versions[loc] == [0, 1, 2, 3, 4, 5, 6]
    got = by_key(world.delta_read[f"{loc}@6"].to_pylist(), "id")
    assert [r["id"] for r in got] == [1, 2, 3, 11, 13, 20]
    assert got[3] == rows([11], "x/y").to_pylist()[0]


def test_positions_upserts_read_by_delta_lake_apply_their_deletion_vectors(world: World) -> None:
    (loc,) = (loc for loc in world.versions if loc.endswith("positions"))
    assert world.versions[loc] == [0, 1, 2, 3, 4]
    got = by_key(world.delta_read[f"{loc}@4"].to_pylist(), "id")
    assert [(r["id"], r["p"]) for r in got] == [
        (1, "x/y"),
        (2, "x/y"),
        (3, "a b"),
        (4, "a b"),
        (7, "x/y"),
    ]
    table = DeltaTable.load(loc)
    assert all(table.snapshot.files[p].deletion_vector for p in table.snapshot_at(2).files)


def test_tables_delta_lake_wrote_with_merge_and_its_streaming_sink_read_and_appended_by_us(
    world: World,
) -> None:
    merge, stream = world.delta_wrote["merge"], world.delta_wrote["stream"]
    assert by_key(merge.to_pylist(), "id") == [
        {"id": 1, "p": "a", "x": 0.5},
        {"id": 2, "p": "b", "x": 9.0},
        {"id": 4, "p": "b", "x": 2.0},
    ]
    assert by_key(stream.to_pylist(), "id") == [
        {"id": 1, "v": "s1"},
        {"id": 2, "v": "s2"},
        {"id": 3, "v": "s3"},
    ]
    for name, delta_rows in (("merge", merge), ("stream", stream)):
        assert by_key(world.ours_before_append[name], "id") == by_key(delta_rows.to_pylist(), "id")
        (loc,) = (loc for loc in world.versions if loc.endswith(name))
        newest = world.versions[loc][-1]
        after = by_key(world.delta_read[f"{loc}@{newest}"].to_pylist(), "id")
        assert [r["id"] for r in after] == [
            *(r["id"] for r in by_key(delta_rows.to_pylist(), "id")),
            100,
        ]

"""``deletes="positions"`` into Delta without Spark: batches of new rows plus keys,
resolved at commit through the index of the table's keys to deletion vectors. Every
version is read by our reader, delta-rs (its query engine, which applies vectors) and
DuckDB, against a dict of the expected rows.

Tests stream_sink.delta.key_positions; stream_sink.delta.deletion_vectors's batch writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from delta_readers import delta_rs_query_rows, duckdb_delta_versions

from stream_sink.commit import FilesCommitter, StateDirectory
from stream_sink.commit.delta.target import MAX_POSITION_RESOLVES, DeltaTarget
from stream_sink.delta import DeltaTable
from stream_sink.delta.actions import AddFile
from stream_sink.delta.deletion_vectors import deleted_rows, write_deletion_vectors
from stream_sink.delta.key_positions import (
    BatchKeys,
    DeltaPositionResolver,
    DeltaResolution,
    build_positions,
    check_deletes,
    keys_folder,
    positions_batch,
    positions_configuration,
    require_deletion_vectors,
)
from stream_sink.delta.merge import copy_on_write
from stream_sink.delta.snapshot import DeltaSnapshot
from stream_sink.exceptions import CommitFailedError, InvalidOptionError
from stream_sink.io.fileio import FileIO
from stream_sink.ops.drill.delete_files import delta_rewrite_versions

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.string())])
DVS = {"delta.enableDeletionVectors": "true"}


def changes(rows: list[tuple[str, int, str, str]]) -> pa.Table:
    """(row kind, id, partition, value) rows."""
    return pa.table(
        {
            "id": pa.array([r[1] for r in rows], pa.int64()),
            "p": [r[2] for r in rows],
            "v": [r[3] for r in rows],
            "op": [r[0] for r in rows],
        }
    )


class Sink:
    """One sink's committer over a positions target, a checkpoint per batch."""

    def __init__(self, table: DeltaTable, state: Path, resolver: DeltaPositionResolver) -> None:
        self.table = table
        self.resolver = resolver
        folder = keys_folder(table.location, "s")
        self.folder = folder
        target = DeltaTarget(table, positions=resolver, keys_folder=folder)
        self.committer = FilesCommitter(
            target, StateDirectory(str(state), kind="memory"), None, job_id="j", operator_id="s"
        )
        self.committer.restore()

    def write(self, batch_id: int, rows: list[tuple[str, int, str, str]]) -> None:
        snapshot = self.table.refresh().snapshot
        batch = positions_batch(
            snapshot, self.table.io, changes(rows), ["id"], "changelog", self.folder, "op"
        )
        self.committer.process(batch_id, batch)
        self.committer.snapshot_state(batch_id)
        self.committer.notify_checkpoint_complete(batch_id)


def apply(model: dict[int, tuple[str, str]], rows: list[tuple[str, int, str, str]]) -> None:
    for kind, key, p, v in rows:
        if kind in ("+I", "+U"):
            model[key] = (p, v)
        else:
            model.pop(key, None)


def rows_of(rows: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
    return sorted((r["id"], r["p"], r["v"]) for r in rows)


def expected(model: dict[int, tuple[str, str]]) -> list[tuple[int, str, str]]:
    return sorted((k, p, v) for k, (p, v) in model.items())


def readers_agree(loc: str, model: dict[int, tuple[str, str]]) -> None:
    table = DeltaTable.load(loc)
    want = expected(model)
    assert rows_of(table.to_arrow().to_pylist()) == want
    assert rows_of(delta_rs_query_rows(loc)) == want
    (duck,) = duckdb_delta_versions(loc, [table.version])
    assert rows_of(duck) == want


def preload(loc: str, partition_by: tuple[str, ...] = ("p",)) -> DeltaTable:
    table = DeltaTable.create(loc, SCHEMA, partition_by=list(partition_by), configuration=DVS)
    for p in ("a", "b"):
        ids = list(range(0, 40)) if p == "a" else list(range(40, 60))
        table.append(pa.table({"id": ids, "p": [p] * len(ids), "v": ["v0"] * len(ids)}, SCHEMA))
    return table


def initial() -> dict[int, tuple[str, str]]:
    return {i: ("a" if i < 40 else "b", "v0") for i in range(60)}


BATCHES: list[list[tuple[str, int, str, str]]] = [
    [("+U", 1, "a", "v1"), ("-D", 41, "b", ""), ("+I", 70, "b", "n")],
    [("+U", 1, "a", "v2"), ("+U", 70, "b", "n2"), ("-U", 2, "a", "v0"), ("+U", 2, "b", "moved")],
    [("-D", 1, "a", ""), ("+I", 1, "b", "back"), ("-D", 70, "b", ""), ("+U", 3, "a", "v3")],
]
"""Updates, deletes, a key moved between partitions, a key deleted and inserted again."""


def test_positions_batches_are_exact_for_every_reader_and_rewrite_no_file(
    tmp_path: Path,
) -> None:
    loc = str(tmp_path / "t")
    table = preload(loc)
    resolver = DeltaPositionResolver(["id"])
    sink = Sink(table, tmp_path / "state", resolver)
    model = initial()
    for batch_id, rows in enumerate(BATCHES):
        sink.write(batch_id, rows)
        apply(model, rows)
        readers_agree(loc, model)
    table = DeltaTable.load(loc)
    assert delta_rewrite_versions(loc) == []
    assert resolver.builds == 1  # kept between the sink's own commits
    assert table.snapshot.txn_version("stream-sink:j:s") == len(BATCHES) - 1
    assert not list(FileIO.for_location(loc).walk(sink.folder))  # keys released


def test_an_older_vector_of_a_file_is_merged_and_duplicates_of_a_key_all_go(
    tmp_path: Path,
) -> None:
    """A file that already has a vector (another writer's MERGE) keeps those rows
    deleted; a key another writer appended twice loses both rows."""
    loc = str(tmp_path / "t")
    table = preload(loc)
    merged = copy_on_write(
        table.snapshot, table.io, changes([("-D", 5, "a", "")]), ["id"], "changelog", "op"
    )
    assert any(a.deletion_vector for a in merged.adds)  # the file keeps 39 of 40 rows
    txn = table.refresh().new_transaction().add_all(merged.adds).add_all(merged.removes)
    txn.commit("MERGE")
    table.append(pa.table({"id": [7], "p": ["b"], "v": ["dup"]}, SCHEMA))
    model = initial()
    del model[5]
    sink = Sink(table, tmp_path / "state", DeltaPositionResolver(["id"]))
    rows = [("+U", 7, "a", "one"), ("+U", 6, "a", "v6")]
    sink.write(0, rows)
    apply(model, rows)
    readers_agree(loc, model)


class RacedResolver(DeltaPositionResolver):
    """Another writer commits right after each of the first ``races`` resolutions."""

    def __init__(self, loc: str, races: int) -> None:
        super().__init__(["id"])
        self.loc = loc
        self.races = races

    def resolve(
        self, snapshot: DeltaSnapshot, io: FileIO, batches: Any, log: Any = None
    ) -> DeltaResolution:
        resolution = super().resolve(snapshot, io, batches, log)
        if self.races:
            self.races -= 1
            other = DeltaTable.load(self.loc)
            gone = changes([("-D", 30 + self.races, "a", "")])  # a DV on a file we mark
            merged = copy_on_write(other.snapshot, other.io, gone, ["id"], "changelog", "op")
            other.new_transaction().add_all(merged.adds).add_all(merged.removes).commit("MERGE")
        return resolution


def test_another_writer_between_lookup_and_commit_resolves_the_keys_again(
    tmp_path: Path,
) -> None:
    loc = str(tmp_path / "t")
    table = preload(loc)
    resolver = RacedResolver(loc, races=2)
    sink = Sink(table, tmp_path / "state", resolver)
    rows = [("+U", 0, "a", "x"), ("-D", 10, "a", "")]
    sink.write(0, rows)
    model = initial()
    apply(model, rows)
    for k in (30, 31):
        del model[k]  # the other writer's deletes survive
    readers_agree(loc, model)
    assert resolver.builds == 3  # one per resolution: the table moved under the first two
    vectors = [
        f for f in table.log.read_commit(DeltaTable.load(loc).version) if isinstance(f, AddFile)
    ]
    assert vectors  # the winning attempt's vectors are the ones committed


def test_a_table_that_moves_under_every_resolution_fails_the_commit(tmp_path: Path) -> None:
    loc = str(tmp_path / "t")
    table = preload(loc)
    sink = Sink(table, tmp_path / "state", RacedResolver(loc, races=MAX_POSITION_RESOLVES))
    with pytest.raises(CommitFailedError, match=f"{MAX_POSITION_RESOLVES} times"):
        sink.write(0, [("+U", 0, "a", "x")])
    # the refused attempts left no vector file behind (only the other writer's)
    table = DeltaTable.load(loc)
    live = {f.dv_id for f in table.snapshot.files.values() if f.deletion_vector}
    assert len(live) <= MAX_POSITION_RESOLVES


def test_a_group_deletes_from_its_own_earlier_batch_through_the_add(tmp_path: Path) -> None:
    """Two batches resolved together: the second one's delete of a key the first one
    wrote is a vector carried by the first one's add (no remove of an unlisted file)."""
    loc = str(tmp_path / "t")
    table = preload(loc, partition_by=())
    snapshot = table.snapshot
    folder = keys_folder(loc, "g")
    first = positions_batch(
        snapshot, table.io, changes([("+U", 1, "a", "v1")]), ["id"], "changelog", folder, "op"
    )
    second = positions_batch(
        snapshot, table.io, changes([("+U", 1, "a", "v2")]), ["id"], "changelog", folder, "op"
    )
    resolver = DeltaPositionResolver(["id"])
    keys = [
        BatchKeys(b.adds, pa.concat_tables([_keys(table, p) for p in b.keys]))
        for b in (first, second)
    ]
    resolution = resolver.resolve(snapshot, table.io, keys)
    (own,) = [a for a in resolution.adds if a.path == first.adds[0].path]
    assert own.deletion_vector is not None
    assert deleted_rows(loc, table.io, own.deletion_vector, "test").tolist() == [0]
    txn = table.new_transaction().add_all(resolution.adds).add_all(resolution.removes)
    txn.commit("MERGE")
    model = initial()
    model[1] = ("a", "v2")
    readers_agree(loc, model)


def _keys(table: DeltaTable, path: str) -> pa.Table:
    from stream_sink.delta.key_positions import read_keys

    return read_keys(table.io, path)


def test_the_index_holds_each_live_key_in_at_most_32_bytes(tmp_path: Path) -> None:
    loc = str(tmp_path / "t")
    table = DeltaTable.create(loc, SCHEMA, configuration=DVS)
    n = 200_000
    table.append(pa.table({"id": range(n), "p": ["a"] * n, "v": ["v"] * n}, SCHEMA))
    index = build_positions(table.snapshot, table.io, ("id",))
    assert index.live == n
    assert index.nbytes / n <= 32


def test_one_vector_file_holds_every_vector_of_a_commit(tmp_path: Path) -> None:
    io = FileIO.for_location(str(tmp_path))
    import numpy as np

    vectors = [
        np.array([0, 5], np.uint64),
        np.array([3], np.uint64),
        np.arange(100, dtype=np.uint64),
    ]
    descriptors = write_deletion_vectors(str(tmp_path), io, vectors)
    assert len({d["pathOrInlineDv"] for d in descriptors}) == 1
    for dv, rows in zip(descriptors, vectors, strict=True):
        assert deleted_rows(str(tmp_path), io, dv, "test").tolist() == rows.tolist()


def test_the_options_of_positions_are_checked(tmp_path: Path) -> None:
    assert check_deletes("positions", "upsert", "here")
    assert not check_deletes("copy-on-write", "append", "here")
    with pytest.raises(InvalidOptionError, match="not one of copy-on-write, positions"):
        check_deletes("equality", "upsert", "here")
    with pytest.raises(InvalidOptionError, match="applies to mode 'upsert' or 'changelog'"):
        check_deletes("positions", "append", "here")
    assert positions_configuration({}, "here") == DVS
    with pytest.raises(InvalidOptionError, match="drop that setting"):
        positions_configuration({"delta.enableDeletionVectors": "false"}, "here")
    plain = DeltaTable.create(str(tmp_path / "plain"), SCHEMA)
    with pytest.raises(InvalidOptionError, match="does not take; enable them"):
        require_deletion_vectors(plain.snapshot, "here")
    require_deletion_vectors(preload(str(tmp_path / "dv")).snapshot, "here")


def test_a_batch_of_deletes_only_commits_vectors_and_no_data_file(tmp_path: Path) -> None:
    """Debezium tombstones (deletes by key, no other column) make a batch of keys alone:
    its version holds vectors and the re-added files, no new data file."""
    loc = str(tmp_path / "t")
    table = preload(loc)
    sink = Sink(table, tmp_path / "state", DeltaPositionResolver(["id"]))
    rows = [("-D", 3, "a", ""), ("-D", 45, "b", ""), ("-D", 999, "a", "")]  # 999: never live
    sink.write(0, rows)
    model = initial()
    apply(model, rows)
    readers_agree(loc, model)
    table = DeltaTable.load(loc)
    adds = [a for a in table.log.read_commit(table.version) if isinstance(a, AddFile)]
    assert adds and all(a.deletion_vector for a in adds)


def test_a_staged_positions_batch_is_not_committed_by_a_copy_on_write_target(
    tmp_path: Path,
) -> None:
    """A sink restarted with deletes changed away from positions would commit the rows
    without their deletes: the target refuses, naming the fix, and the batch stays."""
    loc = str(tmp_path / "t")
    table = preload(loc)
    folder = keys_folder(loc, "s")
    state = StateDirectory(str(tmp_path / "state"), kind="rocksdb")
    committer = FilesCommitter(
        DeltaTarget(table, positions=DeltaPositionResolver(["id"]), keys_folder=folder),
        state,
        None,
        job_id="j",
        operator_id="s",
    )
    committer.restore()
    snapshot = table.refresh().snapshot
    batch = positions_batch(
        snapshot, table.io, changes([("+U", 1, "a", "x")]), ["id"], "changelog", folder, "op"
    )
    committer.process(0, batch)
    committer.close()
    plain = FilesCommitter(
        DeltaTarget(DeltaTable.load(loc)),
        StateDirectory(str(tmp_path / "state"), kind="rocksdb"),
        None,
        job_id="j",
        operator_id="s",
    )
    with pytest.raises(InvalidOptionError, match="restart the sink with deletes='positions'"):
        plain.restore()
    assert DeltaTable.load(loc).version == table.version  # nothing committed


def test_the_kept_index_moves_over_other_writers_versions_without_a_rebuild(
    tmp_path: Path,
) -> None:
    """Between two positions commits another writer compacts the table (OPTIMIZE),
    deletes a key (a new vector on a file) and appends a new key: the index is moved
    over those versions (read: the files they touch), not built again, and the next
    batch is exact for every reader. A schema change in between makes it rebuild."""
    from stream_sink.delta.optimize import optimize

    loc = str(tmp_path / "t")
    table = preload(loc, partition_by=())
    for i in range(6):  # small files for the compaction
        table.append(pa.table({"id": [100 + i], "p": ["a"], "v": ["small"]}, SCHEMA))
    resolver = DeltaPositionResolver(["id"])
    sink = Sink(table, tmp_path / "state", resolver)
    model = initial() | {100 + i: ("a", "small") for i in range(6)}
    first = [("+U", 1, "a", "v1"), ("-D", 101, "a", "")]
    sink.write(0, first)
    apply(model, first)
    other = DeltaTable.load(loc)
    assert optimize(other).version is not None  # compacted the small files
    gone = changes([("-D", 20, "a", "")])
    merged = copy_on_write(other.refresh().snapshot, other.io, gone, ["id"], "changelog", "op")
    other.new_transaction().add_all(merged.adds).add_all(merged.removes).commit("MERGE")
    other.append(pa.table({"id": [500], "p": ["a"], "v": ["theirs"]}, SCHEMA))
    del model[20]
    model[500] = ("a", "theirs")
    second = [
        ("+U", 102, "a", "v2"),
        ("+U", 500, "a", "ours"),
        ("-D", 2, "a", ""),
        ("+U", 1, "a", "v3"),
    ]
    sink.write(1, second)
    apply(model, second)
    readers_agree(loc, model)
    assert (resolver.builds, resolver.moves) == (1, 1)
    assert delta_rewrite_versions(loc) == []

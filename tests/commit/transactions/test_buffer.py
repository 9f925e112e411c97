"""Tests stream_sink.commit.transactions: the hold across micro-batches and restarts
(stream_sink.commit.transactions.buffer over both state backends): a crash before the
hold is written, after it (failpoint ``after-held-write``, also as a real SIGKILL),
between two tables' records and before Spark acknowledges the batch, each followed by
Spark's re-run of the batch, commits every change row exactly once and each
transaction in one batch."""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator

import pyarrow as pa
import pytest
from tx_streams import COLLECTIONS, Event, check_committed, cut, end, make_stream, rows

from stream_sink.commit.transactions import buffer as buffer_module
from stream_sink.commit.transactions.bound import HoldBound
from stream_sink.commit.transactions.buffer import TransactionBuffer
from stream_sink.commit.transactions.split import TransactionColumns
from stream_sink.failpoints import AFTER_HELD_WRITE
from stream_sink.state import OperatorStateBackend, open_state_backend

TABLE_OF = {COLLECTIONS[0]: "a", COLLECTIONS[1]: "b", COLLECTIONS[2]: "b"}
CRASH_POINTS = ("before-hold", AFTER_HELD_WRITE, "between-tables", "before-ack")


class Crash(Exception):
    pass


class Tables:
    """Each table's records of batches in its own durable state: a batch already
    recorded is a replay and changes nothing (as the committer's ``process``)."""

    def __init__(self, kind: str, root: str) -> None:
        self.states = {
            t: open_state_backend(kind, os.path.join(root, f"sink={t}"))
            for t in ("a", "b")  # type: ignore[arg-type]
        }

    def record(self, table: str, batch_id: int, seqs: list[int]) -> None:
        state = self.states[table]
        key = b"rec/%020d" % batch_id
        if state.get(key) is None:
            state.put(key, json.dumps(seqs).encode())

    def committed(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for t in sorted(self.states):
            for key, raw in self.states[t].scan(b"rec/"):
                out.setdefault(int(key[4:]), []).extend(json.loads(raw))
        return out

    def close(self) -> None:
        for s in self.states.values():
            s.close()


class Pipeline:
    """The driver's steps per batch, with a crash at a chosen point."""

    def __init__(self, kind: str, root: str, bound: HoldBound, clock: list[float]) -> None:
        self.kind, self.root, self.bound, self.clock = kind, root, bound, clock
        self.open()

    def open(self) -> None:
        self.state: OperatorStateBackend = open_state_backend(  # type: ignore[arg-type]
            self.kind, os.path.join(self.root, "sink")
        )
        self.buffer = TransactionBuffer(
            self.state,
            sink="sink",
            bound=self.bound,
            columns=TransactionColumns(key="key"),
            clock=lambda: self.clock[0],
        )
        self.tables = Tables(self.kind, self.root)

    def restart(self) -> None:
        self.state.close()
        self.tables.close()
        self.open()

    def batch(self, batch_id: int, events: list[Event], ends: list, crash: str | None) -> None:
        split = self.buffer.split(batch_id, rows(events), ends)
        if crash == "before-hold":
            raise Crash
        self.buffer.record(batch_id, split)
        committed = split.commit
        for i, table in enumerate(("a", "b")):
            if crash == "between-tables" and i == 1:
                raise Crash
            mine = [
                s
                for s, c in zip(
                    committed.column("seq").to_pylist(),
                    committed.column("_data_collection").to_pylist(),
                    strict=True,
                )
                if TABLE_OF[c] == table
            ]
            self.tables.record(table, batch_id, mine)
        if crash == "before-ack":
            raise Crash


@pytest.fixture
def crash_at(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str | None]]:
    """Arms the ``after-held-write`` failpoint as an exception for the next batch."""
    armed: list[str | None] = [None]

    def failpoint(name: str) -> None:
        if armed[0] == name:
            raise Crash

    monkeypatch.setattr(buffer_module, "failpoint", failpoint)
    yield armed


@pytest.mark.parametrize("lose_ends", [False, True])
@pytest.mark.parametrize("seed", range(8))
def test_crashes_at_every_step_commit_every_row_once(
    backend: str, tmp_path: str, crash_at: list[str | None], seed: int, lose_ends: bool
) -> None:
    """With ENDs lost, the bound (in time, which a re-run must not read afresh) forces
    transactions out: every row still lands once and each key's rows in order."""
    rng = random.Random(seed)
    stream = make_stream(rng, transactions=rng.randint(2, 10))
    bound = HoldBound(batches=1000)
    if lose_ends:
        stream.ends = [m for m in stream.ends if rng.random() < 0.7]
        bound = HoldBound(batches=None, ms=2_000_000)
    clock = [1000.0]
    pipe = Pipeline(backend, str(tmp_path), bound, clock)
    try:
        for batch_id, (events, ends) in enumerate(
            cut(rng, stream, rng.randint(2, 6)) + [([], [])] * 3
        ):
            point = rng.choice((*CRASH_POINTS, None, None))
            crash_at[0] = point
            clock[0] += 1000  # a batch every 1000 s
            try:
                pipe.batch(batch_id, events, ends, point)
            except Crash:
                crash_at[0] = None
                clock[0] += 3600  # the re-run comes later, past the bound
                pipe.restart()
                pipe.batch(batch_id, events, ends, None)  # Spark re-runs the batch
        committed = pipe.tables.committed()
        forced = set(stream.tx_of.values()) - {None} if lose_ends else set()
        check_committed(stream, [committed[b] for b in sorted(committed)], forced_out=forced)
        assert pipe.buffer.held().open == {}
    finally:
        pipe.state.close()
        pipe.tables.close()


def test_a_rerun_splits_as_the_first_run_did_whatever_the_time(
    backend: str, tmp_path: str, crash_at: list[str | None]
) -> None:
    clock = [1.0]
    pipe = Pipeline(backend, str(tmp_path), HoldBound(batches=None, ms=60_000), clock)
    try:
        pipe.batch(0, [Event(0, "z", COLLECTIONS[1], 1)], [], None)
        clock[0] = 30.0
        crash_at[0] = AFTER_HELD_WRITE
        with pytest.raises(Crash):
            pipe.batch(1, [Event(1, "z", COLLECTIONS[0], 1)], [], None)
        crash_at[0] = None
        clock[0] = 1000.0  # past the bound now, but batch 1 decided at 30 s: still held
        pipe.restart()
        pipe.batch(1, [Event(1, "z", COLLECTIONS[0], 1)], [], None)
        assert pipe.tables.committed() == {0: [], 1: []}
        assert pipe.buffer.held().row_count == 2
        pipe.batch(2, [], [end("z", {COLLECTIONS[0]: 1, COLLECTIONS[1]: 1})], None)
        assert pipe.tables.committed()[2] == [1, 0]  # table a's rows, then table b's
    finally:
        pipe.state.close()
        pipe.tables.close()


def test_a_forced_transaction_is_logged_counted_and_committed_once(
    backend: str, tmp_path: str, caplog: pytest.LogCaptureFixture
) -> None:
    pipe = Pipeline(backend, str(tmp_path), HoldBound(batches=2), [0.0])
    try:
        pipe.batch(0, [Event(0, "lost:1", COLLECTIONS[0], 1)], [], None)
        pipe.batch(1, [], [], None)
        assert pipe.buffer.metrics.snapshot().held_rows == 1
        with caplog.at_level(logging.WARNING):
            pipe.batch(2, [], [], None)
        assert "lost:1" in caplog.text and "transaction topic" in caplog.text
        metrics = pipe.buffer.metrics.snapshot()
        assert (metrics.forced_transactions, metrics.held_rows) == (1, 0)
        pipe.batch(3, [Event(1, "lost:1", COLLECTIONS[0], 1)], [], None)  # a late event
        assert pipe.tables.committed() == {0: [], 1: [], 2: [0], 3: [1]}
    finally:
        pipe.state.close()
        pipe.tables.close()


def test_a_rerun_batch_is_counted_once(backend: str, tmp_path: str) -> None:
    pipe = Pipeline(backend, str(tmp_path), HoldBound(batches=2), [0.0])
    try:
        pipe.batch(
            0,
            [Event(0, "t:1", COLLECTIONS[0], 1), Event(1, "lost:2", COLLECTIONS[0], 1)],
            [end("t:1", {COLLECTIONS[0]: 1})],
            None,
        )
        pipe.batch(1, [], [], None)
        pipe.batch(2, [], [], None)  # forces lost:2 out
        pipe.batch(2, [], [], None)  # Spark's re-run of batch 2 in the same process
        metrics = pipe.buffer.metrics.snapshot()
        assert (metrics.completed_transactions, metrics.forced_transactions) == (1, 1)
    finally:
        pipe.state.close()
        pipe.tables.close()


def test_a_restart_shows_what_is_held(backend: str, tmp_path: str) -> None:
    pipe = Pipeline(backend, str(tmp_path), HoldBound(), [0.0])
    try:
        pipe.batch(
            4, [Event(0, "t", COLLECTIONS[0], 1), Event(1, "t", COLLECTIONS[0], 2)], [], None
        )
        pipe.restart()
        snap = pipe.buffer.metrics.snapshot()
        assert (snap.held_transactions, snap.held_rows, snap.oldest_held_batch) == (1, 2, 4)
        held = pipe.buffer.held().rows
        assert isinstance(held, pa.Table) and held.column("seq").to_pylist() == [0, 1]
    finally:
        pipe.state.close()
        pipe.tables.close()


_CHILD = r"""
import random, sys
from test_buffer import Pipeline
from tx_streams import cut, make_stream
from stream_sink.commit.transactions.bound import HoldBound

kind, root, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(seed)
stream = make_stream(rng, transactions=8)
pipe = Pipeline(kind, root, HoldBound(batches=1000), [1000.0])
for batch_id, (events, ends) in enumerate(cut(rng, stream, 5)):
    pipe.batch(batch_id, events, ends, None)
    print(batch_id, flush=True)  # acknowledged, as Spark's commit log
"""


@pytest.mark.parametrize("hit", [1, 3])
def test_a_kill_at_the_failpoint_loses_and_repeats_nothing(
    backend: str, tmp_path: str, hit: int
) -> None:
    """The real failpoint: SIGKILL once the hold is durable, then Spark's re-run."""
    here = os.path.dirname(__file__)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]),
        "STREAM_SINK_FAILPOINT": f"{AFTER_HELD_WRITE}@{hit}",
    }
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, backend, str(tmp_path), "7"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    acked = [int(line) for line in child.stdout.split()]
    assert acked == list(range(hit - 1))
    rng = random.Random(7)
    stream = make_stream(rng, transactions=8)
    pipe = Pipeline(backend, str(tmp_path), HoldBound(batches=1000), [5000.0])
    try:
        for batch_id, (events, ends) in enumerate(cut(rng, stream, 5)):
            if batch_id > (acked[-1] if acked else -1):
                pipe.batch(batch_id, events, ends, None)
        committed = pipe.tables.committed()
        check_committed(stream, [committed[b] for b in sorted(committed)])
    finally:
        pipe.state.close()
        pipe.tables.close()

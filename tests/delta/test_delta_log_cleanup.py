"""A writer killed after writing its commit temporary (before linking it to the version
name) leaves ``_delta_log/.<version>.json.<uuid>.tmp``; the next commit removes such
leftovers once they are old enough, and never a young one a live writer may still hold.

Tests stream_sink.delta.expired_logs: expired log entries removed after a checkpoint."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from delta_readers import delta_rs_rows, duckdb_delta_rows

from stream_sink.delta import DeltaTable
from stream_sink.delta.checkpoint import write_checkpoint
from stream_sink.delta.log_cleanup import STALE_TEMP_AGE_S, TEMP_NAME
from stream_sink.delta.writer import write_data_files

KILLED_WRITER = """
import os, signal, sys
import pyarrow as pa
from stream_sink.delta import DeltaTable
from stream_sink.delta.writer import write_data_files
table = DeltaTable.load(sys.argv[1])
adds = write_data_files(table.location, pa.table({"id": [99]}), table.schema, (), io=table.io)
txn = table.new_transaction().add_all(adds)
txn.before_publish(lambda: os.kill(os.getpid(), signal.SIGKILL))
txn.commit()
"""


def temporaries(location: str) -> list[str]:
    return sorted(n for n in os.listdir(Path(location, "_delta_log")) if n.endswith(".tmp"))


def age(path: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


@pytest.mark.slow
def test_temporary_left_by_a_killed_commit_is_removed_by_a_later_commit(tmp_path: Path) -> None:
    location = str(tmp_path / "t")
    table = DeltaTable.create(location, pa.schema([("id", pa.int64())]))
    table.append(pa.table({"id": [1]}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, location], env=env, check=False)
    assert proc.returncode == -signal.SIGKILL
    (left,) = temporaries(location)
    assert TEMP_NAME.match(left) and left.startswith(".00000000000000000002.json.")
    assert sorted(r["id"] for r in delta_rs_rows(location)) == [1]  # readers ignore it

    log_dir = Path(location, "_delta_log")
    age(log_dir / left, STALE_TEMP_AGE_S + 60)
    young = log_dir / f".00000000000000000002.json.{'a' * 32}.tmp"  # a live writer's
    young.write_bytes(b"{}\n")
    foreign = log_dir / ".00000000000000000001.json.someone-else.tmp"  # not our naming
    foreign.write_bytes(b"{}\n")
    age(foreign, STALE_TEMP_AGE_S + 60)
    hint = log_dir / f"_last_checkpoint.{'b' * 32}.tmp"  # a killed checkpoint's
    hint.write_bytes(b"{}")
    age(hint, STALE_TEMP_AGE_S + 60)

    table = DeltaTable.load(location)
    table.append(pa.table({"id": [2]}))
    assert temporaries(location) == sorted([young.name, foreign.name])
    assert table.version == 2
    assert sorted(r["id"] for r in delta_rs_rows(location)) == [1, 2]

    # the young one is removed once it is old, by the next commit at or above its version
    age(young, STALE_TEMP_AGE_S + 60)
    table.append(pa.table({"id": [3]}))
    assert temporaries(location) == [foreign.name]


def test_expired_log_entries_go_after_a_checkpoint_and_readers_still_read(
    tmp_path: Path,
) -> None:
    location = str(tmp_path / "expiring")
    table = DeltaTable.create(
        location,
        pa.schema([("id", pa.int64())]),
        configuration={
            "delta.checkpointInterval": "5",
            "delta.logRetentionDuration": "interval 1 hours",
        },
    )
    log_dir = Path(location, "_delta_log")
    for i in range(1, 10):
        table.append(pa.table({"id": [i]}))
    commits = sorted(p.name for p in log_dir.glob("*.json"))
    assert len(commits) == 10  # nothing old enough yet: versions 0..9, checkpoint at 5
    for p in log_dir.iterdir():  # versions 0..7 (and the checkpoint at 5) age past 1 hour
        if p.name[:20].isdigit() and int(p.name[:20]) <= 7:
            age(p, 3600 + 60)
    table.append(pa.table({"id": [10]}))  # version 10: a checkpoint, then the cleanup
    left = sorted(p.name for p in log_dir.iterdir() if p.name[:20].isdigit())
    assert [n for n in left if n.endswith(".json")] == [f"{v:020d}.json" for v in range(5, 11)]
    assert [n for n in left if "checkpoint" in n] == [
        f"{v:020d}.checkpoint.parquet" for v in (5, 10)
    ]
    expected = list(range(1, 11))
    assert sorted(r["id"] for r in delta_rs_rows(location)) == expected
    assert sorted(DeltaTable.load(location).to_arrow()["id"].to_pylist()) == expected


def test_checkpoints_leave_out_tombstones_past_the_file_retention(tmp_path: Path) -> None:
    """A stream that rewrites files leaves a tombstone per removed file; checkpoints keep
    them only for ``delta.deletedFileRetentionDuration``, so they stay the size of the
    live table instead of growing with every file the stream ever removed."""
    location = str(tmp_path / "rewritten")
    table = DeltaTable.create(
        location,
        pa.schema([("id", pa.int64())]),
        configuration={
            "delta.checkpointInterval": "100",
            "delta.deletedFileRetentionDuration": "interval 1 hours",
        },
    )
    hour_ago = int(time.time() * 1000) - 3600 * 1000 - 60_000
    for i in range(1, 7):  # six rewrites: each removes the one live file, adds one
        txn = table.new_transaction()
        live = list(table.snapshot.files.values())
        txn.read_files(a.path for a in live)
        removed_at = hour_ago if i <= 4 else int(time.time() * 1000)
        txn.add_all(a.remove(removed_at) for a in live)
        txn.add_all(
            write_data_files(location, pa.table({"id": [i]}), table.schema, (), io=table.io)
        )
        txn.commit()
    log_dir = Path(location, "_delta_log")
    write_checkpoint(table.log, table.refresh().snapshot)
    checkpoint = pq.read_table(log_dir / f"{table.version:020d}.checkpoint.parquet")
    removes = [r for r in checkpoint.column("remove").to_pylist() if r is not None]
    assert len(table.snapshot.tombstones) == 5  # the log still has them all
    assert len(removes) == 2  # the ones removed within the hour (rewrites 5 and 6)
    for v in range(table.version):  # readers start from the checkpoint
        (log_dir / f"{v:020d}.json").unlink()
    assert [r["id"] for r in delta_rs_rows(location)] == [6]
    assert DeltaTable.load(location).to_arrow()["id"].to_pylist() == [6]
    assert [r["id"] for r in duckdb_delta_rows(location)] == [6]

"""What a long-running sink leaves in a RocksDB state folder stays bounded: the info
log rolls and old ones go, the MANIFEST rolls, and the folder does not grow with the
number of checkpoints (each writes, deletes and snapshots, as the committer does)."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from stream_sink.state import StateWriteBatch
from stream_sink.state.rocksdb_backend import RocksDBOptions, RocksDBStateBackend

ROUNDS = 200
KIB = 1024


def _sizes(folder: Path, prefix: str) -> list[int]:
    return [p.stat().st_size for p in folder.iterdir() if p.name.startswith(prefix)]


def _folder_bytes(folder: Path) -> int:
    """The folder's size now; a file RocksDB's background compaction removes between the
    listing and its stat counts as gone."""
    total = 0
    for p in folder.iterdir():
        with contextlib.suppress(FileNotFoundError):
            total += p.stat().st_size if p.is_file() else 0
    return total


def test_info_log_manifest_and_folder_stay_bounded(tmp_path: Path) -> None:
    state = tmp_path / "state"
    options = RocksDBOptions(
        path=str(state),
        sync_writes=False,
        max_log_file_size=32 * KIB,
        keep_log_file_num=2,
        max_manifest_file_size=16 * KIB,
    )
    backend = RocksDBStateBackend(options, sink_id="s")
    try:
        sizes = []
        for i in range(ROUNDS):
            batch = StateWriteBatch()
            batch.put(f"pending/{i}".encode(), os.urandom(2 * KIB))
            if i:
                batch.delete(f"pending/{i - 1}".encode())
            backend.write(batch)
            snapshot = tmp_path / f"chk-{i}"
            backend.snapshot_to(str(snapshot))  # flushes: a LOG entry and a new SST each
            shutil.rmtree(tmp_path / f"chk-{i - 1}", ignore_errors=True)
            sizes.append(_folder_bytes(state))
    finally:
        backend.close()
    logs = _sizes(state, "LOG")
    assert len(logs) <= 1 + 2 and max(logs) <= 32 * KIB + 8 * KIB
    manifests = _sizes(state, "MANIFEST-")
    assert len(manifests) == 1 and manifests[0] <= 16 * KIB + 16 * KIB
    # the last checkpoints' folder is no larger than 1.5x the first ones' peak
    assert max(sizes[-50:]) <= 1.5 * max(sizes[:50])

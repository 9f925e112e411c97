"""Checkpoints on an S3 server (SeaweedFS): complete, retain, restore.

Tests stream_sink.checkpoints.transfer: state directories copied to S3 and back."""

from __future__ import annotations

import os

import pytest

from stream_sink.checkpoints import CheckpointMetadata, CheckpointStorage
from stream_sink.io.fileio import FileIO
from stream_sink.state import open_state_backend


@pytest.fixture
def s3_io(s3_props: dict[str, str]) -> FileIO:
    return FileIO.for_location("s3://ckpt", s3_props)


def test_checkpoints_on_s3_complete_retain_and_restore(
    s3_io: FileIO, tmp_path: os.PathLike[str]
) -> None:
    base = str(tmp_path)
    storage = CheckpointStorage("s3://ckpt/checkpoints", "db.t", s3_io, retain=2)
    with open_state_backend("rocksdb", f"{base}/state", sink_id="db.t") as b:
        for cid in (1, 2, 3):
            b.put(b"staged/%d" % cid, b"m%d" % cid)
            meta = CheckpointMetadata.for_batches(
                job_id="q", sink_id="db.t", batch_ids=[cid], created_ms=cid
            )
            storage.complete(cid, meta, b)
        expected = list(b.scan())
    # SeaweedFS keeps a directory entry once its objects are gone: count those with files
    listed = s3_io.list_dir("s3://ckpt/checkpoints/db.t")
    assert [d for d in listed if s3_io.walk(d)] == [
        "s3://ckpt/checkpoints/db.t/chk-2",
        "s3://ckpt/checkpoints/db.t/chk-3",
    ]
    latest = CheckpointStorage("s3://ckpt/checkpoints", "db.t", s3_io).latest()
    assert latest is not None and latest.checkpoint_id == 3
    with storage.restore_state(latest, f"{base}/restored") as restored:
        assert list(restored.scan()) == expected

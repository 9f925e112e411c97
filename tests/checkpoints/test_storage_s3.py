"""Checkpoints on an S3 endpoint (moto's S3 server): complete, retain, restore."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from stream_sink.checkpoints import CheckpointMetadata, CheckpointStorage
from stream_sink.io.fileio import FileIO
from stream_sink.state import open_state_backend

moto_server = pytest.importorskip("moto.server")
boto3 = pytest.importorskip("boto3")


@pytest.fixture(scope="module")
def s3_io() -> Iterator[FileIO]:
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    props = {"s3.endpoint": endpoint, "s3.access-key-id": "test",
             "s3.secret-access-key": "test", "s3.region": "us-east-1"}
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                 aws_access_key_id="test", aws_secret_access_key="test"
                 ).create_bucket(Bucket="ckpt")
    yield FileIO.for_location("s3://ckpt", props)
    server.stop()


def test_checkpoints_on_s3_complete_retain_and_restore(s3_io: FileIO,
                                                       tmp_path: os.PathLike[str]) -> None:
    base = str(tmp_path)
    storage = CheckpointStorage("s3://ckpt/checkpoints", "db.t", s3_io, retain=2)
    with open_state_backend("rocksdb", f"{base}/state", sink_id="db.t") as b:
        for cid in (1, 2, 3):
            b.put(b"staged/%d" % cid, b"m%d" % cid)
            meta = CheckpointMetadata.for_batches(job_id="q", sink_id="db.t", batch_ids=[cid],
                                                  created_ms=cid)
            storage.complete(cid, meta, b)
        expected = list(b.scan())
    assert s3_io.list_dir("s3://ckpt/checkpoints/db.t") == [
        "s3://ckpt/checkpoints/db.t/chk-2", "s3://ckpt/checkpoints/db.t/chk-3"
    ]
    latest = CheckpointStorage("s3://ckpt/checkpoints", "db.t", s3_io).latest()
    assert latest is not None and latest.checkpoint_id == 3
    with storage.restore_state(latest, f"{base}/restored") as restored:
        assert list(restored.scan()) == expected

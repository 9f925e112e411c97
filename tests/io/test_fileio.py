"""FileIO's invariants on a local filesystem and on an S3 server (SeaweedFS),
including put-if-absent (a hard link locally, a conditional PUT on S3)."""

from __future__ import annotations

import sys
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from stream_sink.exceptions import (
    InvalidOptionError,
    MissingFileError,
    UnsupportedError,
    UnsupportedSchemeError,
)
from stream_sink.io.conditional_put import PutOutcome, classify
from stream_sink.io.fileio import FileIO


@pytest.fixture(params=["file", "s3"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[FileIO, str]:
    """An IO and an empty directory location of its scheme."""
    if request.param == "file":
        return FileIO.for_location(str(tmp_path)), str(tmp_path / "io")
    props = request.getfixturevalue("s3_props")
    location = f"s3://lake/io-tests/{uuid.uuid4().hex}"
    return FileIO.for_location(location, props), location


def test_write_read_list_and_delete(root: tuple[FileIO, str]) -> None:
    io, base = root
    io.write_bytes(f"{base}/a/1.bin", b"one")
    io.write_atomic(f"{base}/a/2.bin", b"two")
    assert io.read_bytes(f"{base}/a/1.bin") == b"one"
    assert io.open_input(f"{base}/a/2.bin").read() == b"two"
    assert io.size(f"{base}/a/2.bin") == 3
    assert io.list_dir(f"{base}/a") == [f"{base}/a/1.bin", f"{base}/a/2.bin"]
    io.delete(f"{base}/a/1.bin")
    io.delete(f"{base}/a/1.bin")  # deletes are idempotent
    assert not io.exists(f"{base}/a/1.bin") and io.exists(f"{base}/a/2.bin")
    assert io.list_dir(f"{base}/absent") == []


def test_write_bytes_never_replaces_silently_and_write_atomic_does(
    root: tuple[FileIO, str],
) -> None:
    io, base = root
    io.write_bytes(f"{base}/f", b"old")
    with pytest.raises(FileExistsError, match="f"):
        io.write_bytes(f"{base}/f", b"new")
    io.write_atomic(f"{base}/f", b"new")
    assert io.read_bytes(f"{base}/f") == b"new"


def test_a_missing_file_is_named(root: tuple[FileIO, str]) -> None:
    io, base = root
    for read in (io.read_bytes, io.open_input, io.size):
        with pytest.raises(MissingFileError, match=f"{base}/nope"):
            read(f"{base}/nope")


def test_rename_no_replace_is_exclusive_locally_and_refused_on_object_stores(
    root: tuple[FileIO, str],
) -> None:
    io, base = root
    io.write_bytes(f"{base}/src1", b"1")
    if not io.supports_atomic_rename:
        with pytest.raises(InvalidOptionError, match="SQL catalog"):
            io.rename_no_replace(f"{base}/src1", f"{base}/dst")
        return
    io.write_bytes(f"{base}/src2", b"2")
    assert io.rename_no_replace(f"{base}/src1", f"{base}/dst") is True
    assert io.rename_no_replace(f"{base}/src2", f"{base}/dst") is False
    assert io.read_bytes(f"{base}/dst") == b"1" and io.exists(f"{base}/src2")


def test_locations_and_schemes(tmp_path: Path) -> None:
    assert FileIO.for_location(f"file:{tmp_path}").path_of(f"file:{tmp_path}/x") == (
        f"{tmp_path}/x"
    )
    s3 = FileIO.for_location("s3a://bucket/k", {"s3.region": "eu-west-1", "other": "dropped"})
    assert s3.scheme == "s3" and dict(s3.properties) == {"s3.region": "eu-west-1"}
    assert s3.path_of("s3://bucket/wh/t/f.parquet") == "bucket/wh/t/f.parquet"
    with pytest.raises(UnsupportedSchemeError, match=r"gs:// scheme is not supported") as e:
        FileIO.for_location("gs://bucket/k")
    assert isinstance(e.value, InvalidOptionError) and "FileIO" in str(e.value)
    # a table on the local disk whose files name another store: refused, not looked up
    # under the path part on the local disk
    with pytest.raises(UnsupportedSchemeError, match=r"abfs:// scheme"):
        FileIO.for_location("/wh").open_input("abfs://c@acct.dfs.core.windows.net/t/f.parquet")


def test_a_file_on_another_supported_store_says_where_the_table_is_read() -> None:
    with pytest.raises(UnsupportedSchemeError) as e:
        FileIO.for_location("/wh").open_input("s3://bucket/wh/t/data/f.parquet")
    text = str(e.value)
    assert "not supported" not in text
    assert "'s3://bucket/wh/t/data/f.parquet' is on s3://, but this table's files are read" in text
    assert "file://" in text and "the s3.* properties" in text and "rewrite_table_path" in text
    with pytest.raises(UnsupportedSchemeError, match=r"is on file://, but .* read on s3://"):
        FileIO.for_location("s3://bucket/wh").path_of("file:///wh/t/data/f.parquet")


def test_put_if_absent_creates_once_and_never_replaces(root: tuple[FileIO, str]) -> None:
    io, base = root
    assert io.supports_put_if_absent
    hooks: list[str] = []
    assert io.put_if_absent(
        f"{base}/log/0.json", b"first", before_publish=lambda: hooks.append("x")
    )
    assert hooks == ["x"]
    assert io.put_if_absent(f"{base}/log/0.json", b"second") is False
    assert io.read_bytes(f"{base}/log/0.json") == b"first"
    # the same bytes again are this writer's own (an S3 client retry after a lost response)
    assert io.put_if_absent(f"{base}/log/0.json", b"first") is True
    assert io.list_dir(f"{base}/log") == [f"{base}/log/0.json"]  # no temporary or probe left


def test_racing_put_if_absent_has_exactly_one_winner(root: tuple[FileIO, str]) -> None:
    io, base = root
    barrier = threading.Barrier(4)

    def put(i: int) -> bool:
        barrier.wait(timeout=30)
        return io.put_if_absent(f"{base}/race.json", f"writer {i}".encode())

    with ThreadPoolExecutor(4) as pool:
        won = list(pool.map(put, range(4)))
    assert won.count(True) == 1
    assert io.read_bytes(f"{base}/race.json") == f"writer {won.index(True)}".encode()


def test_s3_conditional_put_responses_are_read_as_s3_documents_them() -> None:
    from botocore.exceptions import ClientError

    def response(status: int, code: str) -> dict[str, Any]:
        error = ClientError(
            {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject"
        )
        return error.response  # type: ignore[return-value]

    assert classify(response(412, "PreconditionFailed")) is PutOutcome.EXISTS
    assert classify(response(409, "ConditionalRequestConflict")) is PutOutcome.CONFLICT
    assert classify(response(501, "NotImplemented")) is PutOutcome.NOT_SUPPORTED
    assert classify(response(403, "AccessDenied")) is None


def test_without_boto3_an_s3_put_if_absent_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "boto3", None)  # as if not installed
    io = FileIO.for_location("s3://lake/x", {"s3.endpoint": f"http://127.0.0.1:1/{uuid.uuid4()}"})
    with pytest.raises(UnsupportedError, match=r"stream_sink\[s3\]"):
        io.put_if_absent("s3://lake/x/0.json", b"{}")


def test_put_if_absent_is_refused_where_there_is_none() -> None:
    with pytest.raises(UnsupportedError, match="no atomic put-if-absent"):
        FileIO.for_location("hdfs://namenode/x").put_if_absent("hdfs://namenode/x/0.json", b"")

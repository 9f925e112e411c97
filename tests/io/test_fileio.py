"""FileIO's invariants on a local filesystem and on an S3-compatible server (moto)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from stream_sink.exceptions import InvalidOptionError, MissingFileError
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
    with pytest.raises(InvalidOptionError, match="gs"):
        FileIO.for_location("gs://bucket/k")

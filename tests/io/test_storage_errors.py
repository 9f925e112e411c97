"""An object store that cannot be reached: one error naming the location, the endpoint,
the bucket and what to check, from the file layer, a Delta table and a catalog alike
(a closed port on this machine stands for an endpoint that is down or mistyped).

Tests stream_sink.io.errors: storage failures turned into errors naming the path."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import stream_sink as ss
from stream_sink.delta import DeltaTable
from stream_sink.exceptions import RemoteStorageError, SinkIOError
from stream_sink.io import FileIO


@pytest.fixture
def closed_endpoint() -> Iterator[dict[str, str]]:
    """S3 properties of an endpoint on a local port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    yield {
        "s3.endpoint": f"http://127.0.0.1:{port}",
        "s3.region": "us-east-1",
        "s3.access-key-id": "key",
        "s3.secret-access-key": "secret",
    }


def check(error: pytest.ExceptionInfo[BaseException], props: dict[str, str], where: str) -> None:
    text = str(error.value)
    assert where in text
    assert f"cannot reach the S3 endpoint {props['s3.endpoint']} for bucket 'lake'" in text
    assert "check that s3.endpoint (or AWS_ENDPOINT_URL)" in text
    assert "secret" not in text.replace("s3.secret-access-key", "")
    assert isinstance(error.value, SinkIOError) and isinstance(error.value, OSError)


def test_file_reads_and_writes_name_the_endpoint_and_bucket(
    closed_endpoint: dict[str, str],
) -> None:
    io = FileIO.for_location("s3://lake/x", closed_endpoint)
    with pytest.raises(RemoteStorageError) as read:
        io.read_bytes("s3://lake/db/t/metadata/v1.metadata.json")
    check(read, closed_endpoint, "reading s3://lake/db/t/metadata/v1.metadata.json failed")
    with pytest.raises(RemoteStorageError) as listed:
        io.list_dir("s3://lake/db")
    check(listed, closed_endpoint, "listing s3://lake/db failed")


def test_the_readme_delta_example_against_an_endpoint_that_is_down(
    closed_endpoint: dict[str, str],
) -> None:
    with pytest.raises(RemoteStorageError) as created:
        DeltaTable.create(
            "s3://lake/delta/events",
            pa.schema([("id", pa.int64())]),
            storage_options=closed_endpoint,
            exist_ok=True,
        )
    check(created, closed_endpoint, "s3://lake/delta/events")


def test_a_catalog_with_its_warehouse_on_an_endpoint_that_is_down(
    closed_endpoint: dict[str, str], tmp_path: Path
) -> None:
    catalog = ss.load_catalog(
        "lake",
        type="sql",
        uri=f"sqlite:///{tmp_path}/catalog.db",
        warehouse="s3://lake/wh",
        **closed_endpoint,
    )
    catalog.create_namespace("db")
    with pytest.raises(RemoteStorageError) as created:
        catalog.create_table("db.t", pa.schema([("id", pa.int64())]))
    check(created, closed_endpoint, "s3://lake/wh/db")
    assert not catalog.table_exists("db.t")

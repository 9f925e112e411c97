"""S3 throttling (``503 SlowDown``) from a real S3 server's front (a fault proxy before
SeaweedFS's S3): a few in a row are retried with backoff by the S3 clients underneath
(pyarrow's for files, boto3's for conditional PUT), so a table commit and the sink's
put-if-absent go through; a storm past the retries fails naming the endpoint, with the
table unchanged."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from fault_proxy import FaultProxy

from stream_sink.catalogs import load_catalog
from stream_sink.exceptions import StreamSinkError
from stream_sink.io import FileIO

pytestmark = pytest.mark.slow
SCHEMA = pa.schema([pa.field("id", pa.int64(), False)])


@pytest.fixture
def proxy(seaweed: Any) -> Iterator[FaultProxy]:
    p = FaultProxy(seaweed.s3_endpoint)
    yield p
    p.close()


def _catalog_behind(props: dict[str, Any], tmp_path: Any, name: str) -> Any:
    """A SQL catalog on ``props`` (the fault proxy's endpoint), with an empty ``db.t``."""
    catalog = load_catalog(
        f"{name}{uuid.uuid4().hex[:6]}",
        type="sql",
        uri=f"sqlite:///{tmp_path}/catalog.db",
        warehouse=f"s3://lake/{name}-{uuid.uuid4().hex[:8]}",
        **props,
    )
    catalog.create_namespace("db")
    return catalog, catalog.create_table("db.t", SCHEMA)


def test_slow_down_is_retried_for_files_commits_and_conditional_puts(
    tmp_path: Any, seaweed: Any, proxy: FaultProxy
) -> None:
    props = {**seaweed.s3_props, "s3.endpoint": proxy.uri}
    catalog, table = _catalog_behind(props, tmp_path, "slow")
    proxy.slow_down(2)
    table.append(pa.table({"id": [1, 2, 3]}, schema=SCHEMA))
    proxy.slow_down(2)
    assert sorted(catalog.load_table("db.t").scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]

    io = FileIO.for_location("s3://ckpt", props)
    marker = f"s3://ckpt/slow-{uuid.uuid4().hex}/lease-1.json"
    proxy.slow_down(2)
    assert io.put_if_absent(marker, b"mine")
    assert not io.put_if_absent(marker, b"theirs")
    assert io.read_bytes(marker) == b"mine"
    assert proxy.slowed == 6


def test_a_slow_down_storm_past_the_retries_fails_naming_the_endpoint(
    tmp_path: Any, seaweed: Any, proxy: FaultProxy
) -> None:
    props = {**seaweed.s3_props, "s3.endpoint": proxy.uri}
    catalog, table = _catalog_behind(props, tmp_path, "storm")
    proxy.slow_down(1000)
    with pytest.raises(StreamSinkError) as failed:
        table.append(pa.table({"id": [1]}, schema=SCHEMA))
    assert proxy.uri.removeprefix("http://") in str(failed.value)
    proxy.slow_down(-proxy.slow_downs)  # the storm is over
    assert catalog.load_table("db.t").current_snapshot() is None

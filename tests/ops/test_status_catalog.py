"""What a sink records of its catalog for ``stream-sink status``: enough to open it again,
never a credential."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

import stream_sink as ss
from stream_sink.commit.iceberg_target import IcebergTarget
from stream_sink.exceptions import NotFoundError
from stream_sink.ops.status import open_recorded_catalog


@pytest.mark.postgres
def test_a_sql_catalog_is_recorded_without_its_password_and_opens_again(
    postgres_url: str, tmp_path: Path
) -> None:
    with_password = postgres_url.replace("://postgres@", "://postgres:hunter2@")
    assert "hunter2" in with_password  # the server trusts local connections: any password
    name = f"c{uuid.uuid4().hex[:8]}"
    catalog = ss.load_catalog(
        name,
        type="sql",
        uri=with_password,
        warehouse=str(tmp_path / "wh"),
        **{
            "s3.endpoint": "http://127.0.0.1:9",
            "s3.secret-access-key": "s3cr3t",
            "jdbc.password": "pw2",
        },
    )
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", pa.schema([("id", pa.int64())]))
    identity = IcebergTarget(table).identity()
    recorded = identity.to_json()
    for secret in ("hunter2", "s3cr3t", "pw2"):
        assert secret not in recorded
    assert json.loads(recorded)["catalog-settings"] == {
        "type": "sql",
        "uri": postgres_url,
        "warehouse": str(tmp_path / "wh"),
        "s3.endpoint": "http://127.0.0.1:9",
    }
    reopened = open_recorded_catalog(identity)
    assert reopened.load_table("db.t").metadata.table_uuid == table.metadata.table_uuid


def test_a_hadoop_warehouse_that_is_gone_is_not_created_again(tmp_path: Path) -> None:
    catalog = ss.load_catalog("demo", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    identity = IcebergTarget(
        catalog.create_table("db.t", pa.schema([("id", pa.int64())]))
    ).identity()
    (tmp_path / "wh").rename(tmp_path / "moved")
    with pytest.raises(NotFoundError, match="does not exist any more; pass --warehouse"):
        open_recorded_catalog(identity)
    assert not (tmp_path / "wh").exists()

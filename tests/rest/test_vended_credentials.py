"""Vended credentials from a real catalog (SeaweedFS's REST catalog minting STS sessions
scoped to one table, ``vending_seaweed``), used past their lifetime: the table's FileIO
renews them; the FileIO an executor is handed renews them too when the catalog is
authenticated with an OAuth2 token (it carries the request and the short-lived token,
never the client secret), and is refused once they expired when the catalog signs with
SigV4 (no renewal without the signing keys travels). Every table is read back by ours,
pyiceberg and DuckDB through the same catalog."""

from __future__ import annotations

import logging
import pickle
import time
import uuid
from typing import Any

import pyarrow as pa
import pytest
from seaweed_server import VENDED_LIFETIME_S

from stream_sink.catalogs import load_catalog
from stream_sink.exceptions import RemoteStorageError
from stream_sink.io.credentials import (
    ACCESS_KEY_ID,
    EXPIRES_AT_MS,
    SECRET_ACCESS_KEY,
    SESSION_TOKEN,
    now_ms,
)
from stream_sink.write.snapshot import commit_write_result
from stream_sink.write.writer_factory import TaskWriterFactory

TABLE_BUCKET = "warehouse"  # the vending server's table bucket
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])


def rows(ids: range) -> pa.Table:
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "name": [f"r{i}" for i in ids]}, schema=SCHEMA
    )


def wait_until_expired(properties: Any) -> None:
    """Sleep until the credentials in ``properties`` are past their expiry (and a second)."""
    left_ms = int(properties[EXPIRES_AT_MS]) - now_ms()
    assert 0 < left_ms <= VENDED_LIFETIME_S * 1000  # vended, short-lived
    time.sleep(left_ms / 1000 + 1.0)


@pytest.mark.slow
def test_a_table_is_written_past_the_lifetime_of_its_vended_credentials(
    vending_seaweed: Any,
) -> None:
    catalog = load_catalog("vend", type="rest", **vending_seaweed.rest_props(TABLE_BUCKET))
    ns = f"ns{uuid.uuid4().hex[:10]}"
    catalog.create_namespace(ns)
    table = catalog.create_table(f"{ns}.events", SCHEMA)
    vended = dict(table.io.current_properties)
    assert vended[SESSION_TOKEN] and vended["s3.access-key-id"] != vending_seaweed.access_key

    shipped = pickle.dumps(table.io)  # what an executor is handed
    assert vending_seaweed.secret_key.encode() not in shipped
    executor_io = pickle.loads(shipped)
    assert executor_io.credentials is None  # a SigV4-signed catalog: no renewal travels
    table.append(rows(range(0, 3)))
    wait_until_expired(vended)

    # the server refuses the credentials it vended once they expire ...
    with pytest.raises(RemoteStorageError, match="the credentials expired"):
        executor_io.exists(table.metadata_location)
    # ... and the table's own FileIO renews them: writing goes on
    table.append(rows(range(3, 6)))
    table.append(rows(range(6, 9)))
    assert table.io.current_properties[SESSION_TOKEN] != vended[SESSION_TOKEN]

    want = list(range(9))
    reloaded = catalog.load_table(f"{ns}.events")
    assert len(reloaded.snapshots()) == 3
    assert sorted(reloaded.scan().to_arrow().column("id").to_pylist()) == want

    from readers import rest_catalog_ids

    assert rest_catalog_ids(vending_seaweed, TABLE_BUCKET, ns, "events") == (want, want)


@pytest.mark.slow
def test_an_executor_renews_vended_credentials_with_the_catalogs_oauth_token(
    vending_seaweed: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A catalog authenticated with OAuth2 client credentials: the writer factory an
    executor is handed (pickled) writes a data file after its credentials expired,
    renewing them by loading the table with the driver's token; the driver commits it."""
    caplog.set_level(logging.INFO, logger="stream_sink")
    catalog = load_catalog("vend", type="rest", **vending_seaweed.oauth_rest_props(TABLE_BUCKET))
    ns = f"ns{uuid.uuid4().hex[:10]}"
    catalog.create_namespace(ns)
    table = catalog.create_table(f"{ns}.events", SCHEMA)
    table.append(rows(range(0, 3)))
    vended = dict(table.io.current_properties)
    assert vended[SESSION_TOKEN] and vended[ACCESS_KEY_ID] != vending_seaweed.access_key

    shipped = pickle.dumps(TaskWriterFactory.for_table(table))  # what an executor is handed
    assert vending_seaweed.secret_key.encode() not in shipped  # the client secret stays
    on_executor = pickle.loads(shipped)
    renewal = on_executor.io.credentials.renewal()
    assert renewal.answer == "table"  # SeaweedFS has no credentials endpoint
    bearer = dict(renewal.headers)["Authorization"]
    assert bearer.startswith("Bearer ") and bearer[7:] not in repr(on_executor)
    wait_until_expired(vended)

    writer = on_executor.create(0, 1, 0)  # partition, task, attempt
    writer.write(rows(range(3, 6)))
    result = writer.complete()  # written with credentials the executor renewed
    renewed = on_executor.io.current_properties
    assert renewed[SESSION_TOKEN] != vended[SESSION_TOKEN]
    (data_file,) = result.data_files
    assert on_executor.io.size(data_file.file_path) == data_file.file_size_in_bytes
    commit_write_result(table, result)

    want = list(range(6))
    reloaded = catalog.load_table(f"{ns}.events")
    assert sorted(reloaded.scan().to_arrow().column("id").to_pylist()) == want

    from readers import rest_catalog_ids

    assert rest_catalog_ids(vending_seaweed, TABLE_BUCKET, ns, "events") == (want, want)
    secrets = {vending_seaweed.secret_key, bearer[7:]} | {
        p[k] for p in (vended, renewed) for k in (SECRET_ACCESS_KEY, SESSION_TOKEN)
    }
    assert not [s for s in secrets if s in caplog.text]

    # a static token is a user's secret: it does not travel, nor does a renewal with it
    static = dict(vending_seaweed.oauth_rest_props(TABLE_BUCKET))
    del static["credential"]
    static["token"] = bearer[7:]
    by_token = load_catalog("static", type="rest", **static).load_table(f"{ns}.events")
    assert by_token.io.credentials is not None  # the driver renews ...
    assert pickle.loads(pickle.dumps(by_token.io)).credentials is None  # ... executors not


@pytest.mark.slow
def test_maintenance_with_vended_credentials_keeps_its_lock_beside_the_table(
    vending_seaweed: Any,
) -> None:
    """Compaction, expiry and orphan removal read, write, list and delete with the
    table's vended credentials; the lease lock, outside the table's files (where the
    vended ones do not reach), with the catalog's own keys."""
    catalog = load_catalog("vend", type="rest", **vending_seaweed.rest_props(TABLE_BUCKET))
    ns = f"ns{uuid.uuid4().hex[:10]}"
    catalog.create_namespace(ns)
    table = catalog.create_table(
        f"{ns}.kept",
        SCHEMA,
        properties={"stream-sink.maintenance.lock-location": f"s3://ckpt/{ns}/locks"},
    )
    for start in (0, 3, 6):
        table.append(rows(range(start, start + 3)))
    orphan = f"{table.location}/data/orphan-00000.parquet"
    table.io.write_bytes(orphan, b"not referenced")
    m = table.maintenance
    with m.lock():
        assert m.rewrite_data_files(min_input_files=2).rewritten_data_files == 3
        now = int(time.time() * 1000)
        assert m.expire_snapshots(older_than_ms=now + 1, retain_last=1).deleted_files > 3
        removed = m.remove_orphan_files(older_than_ms=now + 60_000)
        assert orphan in removed.orphans
    final = catalog.load_table(table.identifier)
    assert len(final.snapshots()) == 1
    assert sorted(final.scan().to_arrow()["id"].to_pylist()) == list(range(9))

"""Vended credentials renewed through a real server's credentials endpoint (the REST spec's
``loadCredentials``): Nessie's Iceberg REST catalog (``nessie``) on SeaweedFS, vending STS
sessions scoped to the table. A table is written in appends spread over time; before each
late append the table's FileIO renews its credentials from the endpoint (Nessie's access
log shows the requests), and the rows are read back by ours, pyiceberg and DuckDB through
the same catalog. The FileIO an executor is handed renews through the same endpoint (the
catalog asks for no authentication, so it carries no token).

The sessions Nessie gets from the STS live 900 s (the least ``AssumeRole`` grants), so the
test makes the client renew them a few seconds after it got them
(``s3.session-token-refresh-margin-ms``) instead of waiting them out; writing on past the
expiry of vended credentials, and their refusal, is tested against SeaweedFS's own
catalog (``test_vended_credentials.py``)."""

from __future__ import annotations

import logging
import pickle
import time
import uuid
from typing import Any

import pyarrow as pa
import pytest
from nessie_server import SESSION_DURATION_S

from stream_sink.catalogs import load_catalog
from stream_sink.io.credentials import (
    ACCESS_KEY_ID,
    EXPIRES_AT_MS,
    REFRESH_MARGIN_MS,
    SECRET_ACCESS_KEY,
    SESSION_TOKEN,
    now_ms,
)

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])
RENEW_AFTER_S = 3
"""Credentials are renewed once they are this old (the margin is the rest of their life)."""


def rows(ids: range) -> pa.Table:
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "name": [f"r{i}" for i in ids]}, schema=SCHEMA
    )


@pytest.mark.slow
def test_vended_credentials_are_renewed_through_the_credentials_endpoint(
    nessie: Any, vending_seaweed: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="stream_sink")
    region = vending_seaweed.s3_props["s3.region"]
    props = nessie.rest_props(region)
    props[REFRESH_MARGIN_MS] = str((SESSION_DURATION_S - RENEW_AFTER_S) * 1000)
    catalog = load_catalog("nessie", type="rest", **props)
    ns = f"ns{uuid.uuid4().hex[:10]}"
    catalog.create_namespace(ns)
    table = catalog.create_table(f"{ns}.events", SCHEMA)

    executor_io = pickle.loads(pickle.dumps(table.io))  # what an executor is handed
    renewal = executor_io.credentials.renewal()
    assert renewal.answer == "credentials" and renewal.url.endswith("/tables/events/credentials")
    assert "Authorization" not in dict(renewal.headers)
    seen = [dict(table.io.current_properties)]
    first = seen[0]
    assert first[SESSION_TOKEN] and first[ACCESS_KEY_ID] != vending_seaweed.access_key
    left_s = (int(first[EXPIRES_AT_MS]) - now_ms()) / 1000
    assert RENEW_AFTER_S < left_s <= SESSION_DURATION_S  # vended by the STS, for 900 s

    table.append(rows(range(0, 3)))
    for start in (3, 6):
        time.sleep(RENEW_AFTER_S + 1)  # the current credentials are due for renewal
        table.append(rows(range(start, start + 3)))  # renews them, then writes with them
        seen.append(dict(table.io.current_properties))

    tokens = {p[SESSION_TOKEN] for p in seen}
    assert len(tokens) == len(seen)  # each round wrote with a new session
    assert table.io.credentials is not None and table.io.credentials.refreshes >= 2
    renewals = [r.getMessage() for r in caplog.records if "new storage credentials" in r.message]
    assert len(renewals) >= 2
    assert all("from the credentials endpoint (loadCredentials)" in m for m in renewals)
    assert len(nessie.requests_to("/tables/events/credentials")) >= 2

    asked = len(nessie.requests_to("/tables/events/credentials"))
    want = list(range(9))
    reloaded = catalog.load_table(f"{ns}.events")
    # the executor's credentials are due too: it renews them itself, then reads
    assert executor_io.read_bytes(reloaded.metadata_location)
    on_executor = dict(executor_io.current_properties)
    seen.append(on_executor)
    assert on_executor[SESSION_TOKEN] not in {first[SESSION_TOKEN], seen[-2][SESSION_TOKEN]}
    assert len(nessie.requests_to("/tables/events/credentials")) == asked + 1

    # three commits (Nessie keeps only the current snapshot in the metadata it serves)
    assert max(s.sequence_number for s in reloaded.snapshots()) == 3
    assert sorted(reloaded.scan().to_arrow().column("id").to_pylist()) == want

    from readers import unauthenticated_rest_ids

    assert unauthenticated_rest_ids(
        nessie.catalog_uri, props["warehouse"], region, ns, "events"
    ) == (want, want)

    secrets = {vending_seaweed.secret_key} | {
        p[k] for p in seen for k in (SECRET_ACCESS_KEY, SESSION_TOKEN)
    }
    logged = caplog.text
    assert not [s for s in secrets if s in logged]

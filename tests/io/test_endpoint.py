"""An ``s3.endpoint`` without a scheme is HTTPS for every client (pyarrow's S3
filesystem, boto3's conditional PUT, Spark's s3a); plain HTTP only when it says so."""

from __future__ import annotations

from typing import Any

import pytest

from stream_sink.io.endpoint import endpoint_url
from stream_sink.io.fileio import FileIO
from stream_sink.io.s3a import s3a_settings

KEYS = {"s3.access-key-id": "ak", "s3.secret-access-key": "sk"}


def _pyarrow_settings(endpoint: str) -> dict[str, Any]:
    fs = FileIO.for_location("s3://b/x", {"s3.endpoint": endpoint, **KEYS}).filesystem()
    return dict(fs.__reduce__()[1][0])


@pytest.mark.parametrize(
    ("endpoint", "scheme", "host"),
    [
        ("minio.internal:9000", "https", "minio.internal:9000"),
        ("https://minio.internal:9000", "https", "minio.internal:9000"),
        ("http://127.0.0.1:8333", "http", "127.0.0.1:8333"),
    ],
)
def test_pyarrow_speaks_https_unless_the_endpoint_says_http(
    endpoint: str, scheme: str, host: str
) -> None:
    settings = _pyarrow_settings(endpoint)
    assert (settings["scheme"], settings["endpoint_override"]) == (scheme, host)


def test_s3a_keeps_tls_on_for_an_endpoint_without_a_scheme() -> None:
    conf = s3a_settings({"s3.endpoint": "minio.internal:9000"})
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "https://minio.internal:9000"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "true"
    plain = s3a_settings({"s3.endpoint": "http://127.0.0.1:8333"})
    assert plain["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"


def test_boto3_gets_a_url_with_its_scheme(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("boto3")
    from stream_sink.io.conditional_put import _make_store

    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    store = _make_store({"s3.endpoint": "minio.internal:9000", **KEYS})
    assert store.client.meta.endpoint_url == "https://minio.internal:9000"
    assert endpoint_url({"s3.endpoint": "minio.internal:9000"}) == "https://minio.internal:9000"
    assert endpoint_url({"s3.endpoint": "http://h:1"}) == "http://h:1"
    assert endpoint_url({}) is None
    monkeypatch.setenv("AWS_ENDPOINT_URL", "store.internal")
    assert endpoint_url({}) == "https://store.internal"

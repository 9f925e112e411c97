"""Where an executor's credential renewal sends its headers: secret ones (the bearer
token) to the catalog's own origin only, never to another origin and never across a
redirect. Two loopback HTTP servers stand for the catalog and another origin: the
catalog's answers a renewal with a redirect to the other, which records what it
received and answers with credentials."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from stream_sink.io.renewal import Renewal, same_origin

TOKEN = "Bearer tok-5e3b1f9a77"
HEADERS = (("Authorization", TOKEN), ("X-Iceberg-Access-Delegation", "vended-credentials"))
CREDENTIALS = {"storage-credentials": [{"prefix": "s3://b/", "config": {"s3.session-token": "n"}}]}


class Origin:
    """A loopback HTTP server: ``/redirect`` answers 307 to ``target``, anything else
    records the request's headers and answers with credentials."""

    def __init__(self) -> None:
        self.received: list[dict[str, str]] = []
        self.target = ""
        origin = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.startswith("/redirect"):
                    self.send_response(307)
                    self.send_header("Location", origin.target)
                    self.end_headers()
                    return
                origin.received.append(dict(self.headers.items()))
                body = json.dumps(CREDENTIALS).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def origins() -> Iterator[tuple[Origin, Origin]]:
    catalog, other = Origin(), Origin()
    yield catalog, other
    catalog.stop()
    other.stop()


def renewal(url: str, catalog: Origin) -> Renewal:
    return Renewal(url, "credentials", "s3://b/t", what="t", headers=HEADERS, origin=catalog.uri)


def test_the_catalogs_own_origin_gets_the_token(origins: tuple[Origin, Origin]) -> None:
    catalog, _ = origins
    assert renewal(f"{catalog.uri}/v1/creds", catalog).fetch({})["s3.session-token"] == "n"
    assert catalog.received[0]["Authorization"] == TOKEN


def test_another_origin_gets_no_token(origins: tuple[Origin, Origin]) -> None:
    catalog, other = origins
    assert renewal(f"{other.uri}/v1/creds", catalog).fetch({})["s3.session-token"] == "n"
    (got,) = other.received
    assert "Authorization" not in got
    assert got["X-Iceberg-Access-Delegation"] == "vended-credentials"


@pytest.mark.parametrize("where", ["another origin", "the same origin"])
def test_a_redirect_is_followed_without_the_token(
    origins: tuple[Origin, Origin], where: str
) -> None:
    catalog, other = origins
    target = other if where == "another origin" else catalog
    catalog.target = f"{target.uri}/v1/creds"
    assert renewal(f"{catalog.uri}/redirect", catalog).fetch({})["s3.session-token"] == "n"
    (got,) = target.received
    assert "Authorization" not in got


def test_origins_compare_scheme_host_and_port() -> None:
    assert same_origin("https://Catalog.example/v1/x", "https://catalog.example:443/api")
    assert not same_origin("https://catalog.example/v1", "http://catalog.example/v1")
    assert not same_origin("https://catalog.example/v1", "https://catalog.example:8443/v1")
    assert not same_origin("https://catalog.example/v1", "https://evil.example/v1")

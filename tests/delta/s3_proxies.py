"""Faulty S3 stores for tests: forwarding proxies in front of a real S3 server
(SeaweedFS) that show what it does not.

- :func:`store_ignoring_if_none_match` drops ``If-None-Match`` from every request, so a
  "conditional" PUT overwrites, as on a store without conditional writes.
- :func:`store_with_conflicts` answers the first ``n`` conditional PUTs of commit files
  (``*.json``) with ``409 ConditionalRequestConflict`` without forwarding them, as S3
  does while another conditional write of the key is in flight.

A real server checks each request's SigV4 signature, which covers the ``Host`` header
and the signed headers (``If-None-Match`` among them): the proxy signs every request it
forwards again, with the store's keys (the ``s3.*`` properties), as the client would
have signed the request it forwards.

Request bodies are forwarded by ``Content-Length`` (what boto3 sends); pyarrow's chunked
uploads of data files should go to the server directly."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

DROPPED = {"if-none-match", "host", "connection", "transfer-encoding"}
SIGNATURE = {"authorization", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"}


CONFLICT = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>ConditionalRequestConflict</Code>'
    b"<Message>A conflicting conditional operation is in progress</Message></Error>"
)


def _signed(
    method: str, url: str, headers: Mapping[str, str], body: bytes | None, s3: Mapping[str, str]
) -> dict[str, str]:
    """``headers`` with a SigV4 signature of the request to ``url`` by the keys in ``s3``
    (the ``s3.*`` properties) in place of the client's."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    kept = {k: v for k, v in headers.items() if k.lower() not in SIGNATURE}
    request = AWSRequest(method=method, url=url, data=body or b"", headers=kept)
    keys = Credentials(s3["s3.access-key-id"], s3["s3.secret-access-key"])
    S3SigV4Auth(keys, "s3", s3.get("s3.region", "us-east-1")).add_auth(request)
    return dict(request.headers.items())


def _handler(
    s3: Mapping[str, str], drop_condition: bool, conflicts: list[str]
) -> type[BaseHTTPRequestHandler]:
    """``s3``: the store's properties (endpoint and keys); ``conflicts``: one entry per
    409 still to answer; each answered one is replaced by the path it was answered for."""
    upstream = s3["s3.endpoint"]
    target = urlparse(upstream)
    dropped = DROPPED if drop_condition else DROPPED - {"if-none-match"}
    lock = threading.Lock()

    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _conflict(self) -> bool:
            if self.command != "PUT" or "If-None-Match" not in self.headers:
                return False
            if not self.path.split("?")[0].endswith(".json"):
                return False
            with lock:
                if "" not in conflicts:
                    return False
                conflicts[conflicts.index("")] = self.path
            self.send_response(409)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(CONFLICT)))
            self.end_headers()
            self.wfile.write(CONFLICT)
            return True

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            if self._conflict():
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() not in dropped}
            headers = _signed(self.command, upstream + self.path, headers, body, s3)
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                reply = conn.getresponse()
                data = reply.read()
                self.send_response(reply.status)
                skip = {"transfer-encoding", "connection"}
                if self.command != "HEAD":  # a HEAD's length is the object's
                    skip.add("content-length")
                    self.send_header("Content-Length", str(len(data)))
                for k, v in reply.getheaders():
                    if k.lower() not in skip:
                        self.send_header(k, v)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
            finally:
                conn.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        def log_message(self, *args: object) -> None:
            return None

    return Forward


@contextmanager
def store_ignoring_if_none_match(s3: Mapping[str, str]) -> Iterator[str]:
    """The endpoint of a proxy to the store of ``s3`` (its ``s3.*`` properties) that
    drops ``If-None-Match``."""
    with _proxy(_handler(s3, True, [])) as endpoint:
        yield endpoint


@contextmanager
def store_with_conflicts(s3: Mapping[str, str], n: int) -> Iterator[tuple[str, list[str]]]:
    """The endpoint of a proxy to the store of ``s3`` answering 409 to the first ``n``
    conditional PUTs of ``*.json``, and the list of the paths it answered so."""
    answered = [""] * n
    with _proxy(_handler(s3, False, answered)) as endpoint:
        yield endpoint, answered


@contextmanager
def _proxy(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()

"""An S3-compatible store without conditional writes, for tests: a forwarding proxy in
front of the moto server that drops ``If-None-Match`` from every request, so a
"conditional" PUT overwrites as on a store that ignores the header."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

DROPPED = {"if-none-match", "host", "connection", "transfer-encoding"}


def _handler(upstream: str) -> type[BaseHTTPRequestHandler]:
    target = urlparse(upstream)

    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in DROPPED}
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                reply = conn.getresponse()
                data = reply.read()
                self.send_response(reply.status)
                for k, v in reply.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
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
def store_ignoring_if_none_match(upstream: str) -> Iterator[str]:
    """The endpoint of a proxy to ``upstream`` that drops ``If-None-Match``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(upstream))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()

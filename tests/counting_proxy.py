"""A forwarding HTTP proxy on loopback in front of a real REST catalog server, counting
the requests a client sends it by kind (the servers the tests run keep no access log we
can read, except Nessie's).

``CountingProxy.start(target_uri)`` listens on a free loopback port (``uri``), forwards
every request to ``target_uri`` unchanged (method, path, query, headers but ``Host``,
body) and the answer back, and records each request's kind (:func:`kind`). It changes
nothing the client or the server sees but the address; ``stop()`` closes it.
"""

from __future__ import annotations

import http.client
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

_TABLE = re.compile(r"/namespaces/[^/]+/tables/[^/]+$")
_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "host", "content-length"})


def kind(method: str, path: str) -> str:
    """``config``, ``token``, ``loadTable``, ``commit``, ``credentials`` or ``other``."""
    path = path.split("?", 1)[0].rstrip("/")
    if path.endswith("/v1/config"):
        return "config"
    if path.endswith("/v1/oauth/tokens"):
        return "token"
    if path.endswith("/credentials"):
        return "credentials"
    if _TABLE.search(path):
        return {"GET": "loadTable", "POST": "commit"}.get(method, "other")
    return "other"


@dataclass
class CountingProxy:
    uri: str
    server: ThreadingHTTPServer
    requests: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @staticmethod
    def start(target_uri: str) -> CountingProxy:
        target = urlsplit(target_uri)
        holder: list[CountingProxy] = []

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _forward(self) -> None:
                proxy = holder[0]
                with proxy.lock:
                    proxy.requests.append((self.command, self.path))
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=120)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    self.send_response(resp.status, resp.reason)
                    for k, v in resp.getheaders():
                        if k.lower() not in _HOP:
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                finally:
                    conn.close()

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _forward

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        proxy = CountingProxy(f"http://127.0.0.1:{server.server_address[1]}", server)
        holder.append(proxy)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return proxy

    def counts(self) -> Counter[str]:
        """How many requests of each kind were sent so far."""
        with self.lock:
            return Counter(kind(m, p) for m, p in self.requests)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

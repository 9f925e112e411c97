"""A fault-injecting HTTP proxy on loopback in front of a real REST catalog server.

Requests pass through unchanged (the Host header too, so SigV4 signatures stay valid)
unless a fault is armed for commits (POST to ``.../tables/<name>`` or to
``.../transactions/commit``, a commit of several tables):
- ``fail_after_apply(n, status)``: forward the next n commits, then answer ``status``
  instead of the server's reply (the server applied them; the client cannot know);
- ``conflict(n)``: answer 409 to the next n commits without forwarding them;
- ``drop(n)``: close the connection without an answer on the next n commits, after
  forwarding them;
- ``lose(n)``: close the connection on the next n commits without forwarding them.
``down()``/``up()`` make every request fail with a dropped connection, as a stopped server;
``tear(n)``: forward only the first table of the next n commits of several tables, then
answer 500 (a server that did not apply them atomically); ``missing(n)``: answer 404 to
the next n commits without forwarding them (a server without the endpoint);
``refuse(n)`` does that to the next n requests of any kind (none reaches the server).
``slow_down(n)`` answers the next n requests of any kind with S3's ``503 SlowDown`` (in
front of an S3 endpoint: throttling), without forwarding them; ``slowed`` counts them.
``advertise_idempotency()`` adds ``idempotency-key-lifetime`` to the server's ``/v1/config``
answer; ``hide_endpoint(e)`` removes ``e`` from its ``endpoints`` list (``"*"``: the
whole list, as a server that lists none); ``commit_headers``
records each commit's headers.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

SLOW_DOWN = (
    '<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    "<Message>Please reduce your request rate.</Message></Error>"
)
_COMMIT = re.compile(r"/v1/(.+/)?(namespaces/[^/]+/tables/[^/]+|transactions/commit)$")


class FaultProxy:
    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self.target_host = parts.hostname or "127.0.0.1"
        self.target_port = parts.port or 80
        self.lock = threading.Lock()
        self.after_apply: list[int] = []
        self.conflicts = 0
        self.drops = 0
        self.is_down = False
        self.refusals = 0
        self.slow_downs = 0
        self.slowed = 0
        self.losses = 0
        self.tears = 0
        self.missings = 0
        self.commits_seen = 0
        self.commit_bodies: list[dict[str, object]] = []
        self.commit_headers: list[dict[str, str]] = []
        self.idempotency = False
        self.hidden: set[str] = set()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                return None

            def _handle(self) -> None:
                body = self._body()
                if proxy._refused():
                    self.close_connection = True
                    self.connection.close()
                    return
                if proxy._slowed():
                    data = SLOW_DOWN.encode()
                    self.send_response(503)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                    return
                commit = self.command == "POST" and bool(_COMMIT.search(self.path.split("?")[0]))
                fault = proxy._take(commit, body)
                if commit:
                    proxy.commit_headers.append(dict(self.headers))
                if fault == "lose":
                    self.close_connection = True
                    self.connection.close()
                    return
                if fault == "missing":
                    self._reply(
                        404,
                        {"error": {"message": "no such route", "type": "NotFound", "code": 404}},
                    )
                    return
                if fault == "tear":
                    doc = json.loads(body)
                    body = json.dumps({"table-changes": doc["table-changes"][:1]}).encode()
                    self.headers.replace_header("Content-Length", str(len(body)))
                    fault = 500
                if fault == "conflict":
                    self._reply(
                        409,
                        {
                            "error": {
                                "message": "injected conflict",
                                "type": "CommitFailedException",
                                "code": 409,
                            }
                        },
                    )
                    return
                sent = dict(self.headers)
                config = self.path.split("?")[0].endswith("/v1/config")
                if config:  # read as plain JSON, to rewrite it
                    sent = {k: v for k, v in sent.items() if k.lower() != "accept-encoding"}
                status, headers, data = proxy._forward(self.command, self.path, sent, body)
                if self.path.split("?")[0].endswith("/v1/config") and status == 200:
                    data = proxy._config(data)
                if fault == "drop":
                    self.close_connection = True
                    self.connection.close()
                    return
                if isinstance(fault, int):
                    self._reply(
                        fault,
                        {
                            "error": {
                                "message": "injected failure",
                                "type": "ServiceFailureException",
                                "code": fault,
                            }
                        },
                    )
                    return
                self.send_response(status)
                head = self.command == "HEAD"  # its Content-Length is the object's size
                for k, v in headers:
                    skip = ("transfer-encoding", "connection") + (
                        () if head else ("content-length",)
                    )
                    if k.lower() not in skip:
                        self.send_header(k, v)
                if not head:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> bytes:
                """The request body as sent: a chunked one (S3's aws-chunked uploads) with
                its framing and trailers, to be forwarded chunked as it came."""
                if "chunked" not in (self.headers.get("Transfer-Encoding") or "").lower():
                    length = int(self.headers.get("Content-Length") or 0)
                    return self.rfile.read(length) if length else b""
                raw = bytearray()
                while True:
                    line = self.rfile.readline()
                    raw += line
                    if int(line.split(b";")[0].strip() or b"0", 16) == 0:
                        while line not in (b"\r\n", b"\n", b""):  # trailers, blank line
                            line = self.rfile.readline()
                            raw += line
                        return bytes(raw)
                    raw += self.rfile.read(int(line.split(b";")[0].strip(), 16) + 2)

            def _reply(self, status: int, body: dict[str, object]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def _refused(self) -> bool:
        with self.lock:
            if self.refusals:
                self.refusals -= 1
                return True
        return self.is_down

    def _slowed(self) -> bool:
        with self.lock:
            if self.slow_downs:
                self.slow_downs -= 1
                self.slowed += 1
                return True
        return False

    def slow_down(self, n: int) -> None:
        with self.lock:
            self.slow_downs += n

    def refuse(self, n: int) -> None:
        with self.lock:
            self.refusals += n

    def _take(self, commit: bool, body: bytes) -> str | int | None:
        if not commit:
            return None
        with self.lock:
            self.commits_seen += 1
            self.commit_bodies.append(json.loads(body or b"{}"))
            if self.losses:
                self.losses -= 1
                return "lose"
            if self.missings:
                self.missings -= 1
                return "missing"
            if self.tears and b"table-changes" in body:
                self.tears -= 1
                return "tear"
            if self.conflicts:
                self.conflicts -= 1
                return "conflict"
            if self.after_apply:
                return self.after_apply.pop(0)
            if self.drops:
                self.drops -= 1
                return "drop"
        return None

    def _forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(self.target_host, self.target_port, timeout=60)
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for k, v in headers.items():
                conn.putheader(k, v)
            if "chunked" in {
                v.lower() for k, v in headers.items() if k.lower() == "transfer-encoding"
            }:
                conn.endheaders()
                conn.send(body)  # the chunked body with its framing, as it came
            else:
                conn.endheaders(body or None)
            resp = conn.getresponse()
            return resp.status, resp.getheaders(), resp.read()
        finally:
            conn.close()

    def fail_after_apply(self, n: int = 1, status: int = 500) -> None:
        with self.lock:
            self.after_apply.extend([status] * n)

    def conflict(self, n: int) -> None:
        with self.lock:
            self.conflicts += n

    def _config(self, data: bytes) -> bytes:
        if not self.idempotency and not self.hidden:
            return data
        doc = json.loads(data)
        if self.idempotency:
            doc.setdefault("overrides", {})["idempotency-key-lifetime"] = "PT30M"
        if "*" in self.hidden:
            doc.pop("endpoints", None)
        elif self.hidden and doc.get("endpoints"):
            doc["endpoints"] = [e for e in doc["endpoints"] if e not in self.hidden]
        return json.dumps(doc).encode()

    def hide_endpoint(self, endpoint: str) -> None:
        self.hidden.add(endpoint)

    def tear(self, n: int = 1) -> None:
        with self.lock:
            self.tears += n

    def missing(self, n: int = 1) -> None:
        with self.lock:
            self.missings += n

    def advertise_idempotency(self) -> None:
        self.idempotency = True

    def lose(self, n: int = 1) -> None:
        with self.lock:
            self.losses += n

    def drop(self, n: int = 1) -> None:
        with self.lock:
            self.drops += n

    def down(self) -> None:
        self.is_down = True

    def up(self) -> None:
        self.is_down = False

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

"""How an executor renews a table's vended storage credentials without the catalog: a
small frozen description of one request to the catalog (Iceberg Java's
``VendedCredentialsProvider`` does the same from a FileIO's properties).

The catalog (table layer) builds a :class:`Renewal` when it can renew without a
long-lived secret, and a table's FileIO carries it to Spark's executors when it is
pickled. There it renews the credentials as the driver does (ahead of expiry, and once
after a refusal as expired: :class:`~stream_sink.io.credentials.RefreshingCredentials`).

Invariants:
- What travels: the URL to ask, the headers to send and how to read the answer. The
  only secret among them is a short-lived OAuth2 bearer token the driver obtained with
  its client credentials; the client secret, a static user token and SigV4 keys never
  travel (no Renewal is built for a catalog that needs them).
- The token never appears in a repr, a log line or an error message.
- Secret headers (``Authorization`` and every other header
  :func:`stream_sink.secrets.is_secret` names) go only to the catalog's own origin
  (``origin``: scheme, host and port): a URL of another origin gets the public headers
  only, and a redirect is followed without any secret header.
- A failed renewal is a :class:`~stream_sink.exceptions.RemoteStorageError` naming the
  table, the URL (without its query) and the server's status and message.
- The answer is read as the driver reads it: a ``LoadCredentialsResponse``'s
  ``storage-credentials``, or a ``LoadTableResult``'s ``config`` overlaid with them; the
  entry with the longest prefix of the table's location applies.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from stream_sink.exceptions import RemoteStorageError
from stream_sink.retry import Backoff, retrying
from stream_sink.secrets import is_secret, scrub

log = logging.getLogger(__name__)

Answer = Literal["credentials", "table"]
"""How to read the answer: a LoadCredentialsResponse, or a LoadTableResult."""

_BACKOFF = Backoff(first_s=0.2, max_s=4.0, max_attempts=4)
_TRANSIENT = frozenset({429, 500, 502, 503, 504})


def _transient(e: Exception) -> bool:
    """A 429 or 5xx answer, a refused, reset or timed-out connection, or a body that is
    not JSON: worth another attempt."""
    if isinstance(e, urllib.error.HTTPError):
        return e.code in _TRANSIENT
    return isinstance(e, (OSError, ValueError))


@dataclass(frozen=True)
class Renewal:
    """One GET to the catalog that answers with new storage credentials for the table
    whose files are under ``location``."""

    url: str
    answer: Answer
    location: str
    what: str
    """The table, for messages: ``catalog 'lake' table ns.events``."""
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """Sent with the request; may hold ``Authorization: Bearer <short-lived token>``."""
    timeout_s: float = 60.0
    origin: str = ""
    """The catalog's URL: secret headers go only to its origin ("": ``url``'s own)."""

    def __repr__(self) -> str:
        return f"Renewal({self.what!r}, {_without_query(self.url)!r}, answer={self.answer!r})"

    def fetch(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` (the storage properties in use) overlaid with the new credentials."""
        body = self._get()
        fresh = answer_properties(body, self.answer, self.location)
        if not fresh:
            raise RemoteStorageError(
                f"{self.what}: renewing its storage credentials from "
                f"{_without_query(self.url)} brought none for {self.location}; the catalog "
                "stopped vending them, or vends them for another location"
            )
        return {**base, **fresh}

    def _get(self) -> Any:
        headers = dict(self.headers)
        if not same_origin(self.url, self.origin or self.url):
            headers = {k: v for k, v in headers.items() if not is_secret(f"header.{k}")}
        request = urllib.request.Request(self.url, headers=headers, method="GET")
        opener = urllib.request.build_opener(_RedirectWithoutSecrets)

        def attempt(_: int) -> Any:
            with opener.open(request, timeout=self.timeout_s) as resp:
                return json.loads(resp.read() or b"null")

        try:
            return retrying(attempt, _BACKOFF, _transient, on_retry=self._log_retry)
        except urllib.error.HTTPError as e:
            raise self._failure(f"answered {e.code}{self._said(e)}", e.code) from None
        except (OSError, ValueError) as e:  # refused, reset, timed out; not JSON
            raise self._failure(f"failed ({type(e).__name__})", None) from None

    def _log_retry(self, e: Exception, retry: int, wait_s: float) -> None:
        cause = str(e.code) if isinstance(e, urllib.error.HTTPError) else type(e).__name__
        log.warning(
            "%s: renewing storage credentials: %s; attempt %d of %d in %.1f s",
            self.what,
            cause,
            retry + 1,
            _BACKOFF.max_attempts,
            wait_s,
        )

    def _said(self, e: urllib.error.HTTPError) -> str:
        try:
            text = e.read().decode("utf-8", "replace")
        except OSError:
            return ""
        try:
            err = json.loads(text).get("error")
            text = str(err.get("message", "")) if isinstance(err, dict) else str(err or text)
        except (ValueError, AttributeError):
            pass
        return f": {self._scrub(text)[:300]}" if text.strip() else ""

    def _failure(self, said: str, status: int | None) -> RemoteStorageError:
        hint = (
            "the catalog refused the token the driver handed out (it expired, or was "
            "revoked); the query's restart hands out a new one"
            if status in (401, 403, 419)
            else "check that the catalog is reachable from the executors"
        )
        return RemoteStorageError(
            f"{self.what}: renewing its storage credentials failed: GET "
            f"{_without_query(self.url)} {said}; {hint}"
        )

    def _scrub(self, text: str) -> str:
        return scrub(text, {f"header.{k}": v for k, v in self.headers})


class _RedirectWithoutSecrets(urllib.request.HTTPRedirectHandler):
    """Follows a redirect without the request's secret headers (urllib's own handler
    copies every header but the body's to the new URL, whatever its origin)."""

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None:
            for name in [n for n in new.headers if is_secret(f"header.{n}")]:
                del new.headers[name]
        return new


def same_origin(url: str, other: str) -> bool:
    """Whether two URLs share scheme, host and port (default ports filled in)."""
    return _origin(url) == _origin(other)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port or _DEFAULT_PORTS.get(scheme)


_DEFAULT_PORTS = {"http": 80, "https": 443}


def storage_credentials(body: Any, location: str) -> dict[str, str]:
    """The ``config`` of the ``storage-credentials`` entry (of a LoadTableResult or a
    LoadCredentialsResponse) whose prefix is the longest one ``location`` starts with;
    empty when none matches."""
    best: tuple[int, dict[str, str]] = (-1, {})
    for cred in (body or {}).get("storage-credentials") or []:
        prefix = str(cred.get("prefix", ""))
        if location.startswith(prefix) and len(prefix) > best[0]:
            best = (len(prefix), {str(k): str(v) for k, v in (cred.get("config") or {}).items()})
    return best[1]


def answer_properties(body: Any, answer: Answer, location: str) -> dict[str, str]:
    """The storage properties an answer gives the table at ``location``: a
    LoadCredentialsResponse's credentials, or a LoadTableResult's ``config`` overlaid
    with its credentials."""
    if not isinstance(body, dict):
        return {}
    if answer == "credentials":
        return storage_credentials(body, location)
    config = {str(k): str(v) for k, v in (body.get("config") or {}).items()}
    config.update(storage_credentials(body, location))
    return config


def _without_query(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))

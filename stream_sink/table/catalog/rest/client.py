"""The HTTP side of the REST catalog: configuration, authentication, requests, errors.

Reused from pyiceberg (the ``rest`` extra): its OAuth2 auth managers (client-credentials
token fetch from ``oauth2-server-uri`` or ``<uri>/v1/oauth/tokens``, a fixed ``token``)
and the adapter that puts their header on a ``requests`` session, so a pyiceberg
configuration (``credential``, ``token``, ``scope``, ``audience``, ``resource``,
``oauth2-server-uri``) behaves the same. Written here: the request loop (bounded retries
of reads, token refresh on 401/419, no blind retry of commits), SigV4 (see ``sigv4``),
the error mapping onto stream_sink's exceptions, and the ``/v1/config`` merge.

Invariants:
- Properties after ``/v1/config``: the server's defaults, overridden by the client's,
  overridden by the server's overrides (the spec's order). ``uri`` may be overridden.
- Reads (GET, HEAD) and requests that change nothing on failure are retried on dropped
  connections, timeouts and 429/502/503/504 with bounded exponential backoff
  (``rest.max-retries``, ``rest.retry-max-wait-ms``). A commit (POST to a table) is sent
  again only with the same ``Idempotency-Key``, which is sent only when the server
  advertises ``idempotency-key-lifetime``; otherwise a failure is reported as unknown
  and the caller resolves it by reading the table back.
- No message, log line or repr carries a secret: credentials, tokens and signing keys
  are never formatted; server messages are quoted as the server sent them, with the
  value of every secret property (:func:`stream_sink.secrets.is_secret`) and the
  secret half of ``credential`` masked.
- Executors get headers to renew vended credentials with (:meth:`RestClient.executor_headers`)
  only when those hold no long-lived secret: no auth at all, or the bearer token the
  client credentials were exchanged for (renewed first when less than half its lifetime,
  at most five minutes, is left); never for SigV4, a static ``token`` or a secret header
  (every ``header.*`` but those :data:`stream_sink.secrets.PUBLIC_HEADERS` names).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from stream_sink.exceptions import (
    CatalogAuthError,
    CatalogRequestError,
    CatalogUnavailableError,
    InvalidOptionError,
)
from stream_sink.io.credentials import now_ms, refresh_margin_ms
from stream_sink.io.renewal import same_origin
from stream_sink.retry import Backoff, OnRetry, TryAgain, retrying
from stream_sink.secrets import is_secret, scrub

log = logging.getLogger(__name__)

URI = "uri"
WAREHOUSE = "warehouse"
PREFIX = "prefix"
CREDENTIAL = "credential"
TOKEN = "token"
SCOPE = "scope"
OAUTH2_SERVER_URI = "oauth2-server-uri"
HEADER_PREFIX = "header."
ACCESS_DELEGATION = "X-Iceberg-Access-Delegation"
IDEMPOTENCY_LIFETIME = "idempotency-key-lifetime"
MAX_RETRIES = "rest.max-retries"
RETRY_MAX_WAIT_MS = "rest.retry-max-wait-ms"
REQUEST_TIMEOUT_MS = "rest.request-timeout-ms"
NAMESPACE_SEPARATOR = "namespace-separator"
LOAD_CREDENTIALS = "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials"
"""The REST spec's ``loadCredentials``, as a server lists it in ``/v1/config``'s
``endpoints``."""

_TRANSIENT_STATUS = frozenset({429, 502, 503, 504})
_READS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True)
class Response:
    status: int
    body: Any
    headers: Mapping[str, str]


class RestClient:
    """One catalog's HTTP session against one REST server."""

    def __init__(self, catalog: str, properties: Mapping[str, str]) -> None:
        try:
            import requests
        except ImportError as e:
            raise InvalidOptionError(
                f"catalog {catalog!r}: type='rest' needs requests: pip install 'stream_sink[rest]'"
            ) from e
        self._requests = requests
        self.catalog = catalog
        props = dict(properties)
        if not props.get(URI):
            raise InvalidOptionError(f"catalog {catalog!r}: type='rest' needs uri=http(s)://...")
        self.properties = props
        self._max_retries = _int(props, MAX_RETRIES, 5, catalog)
        self._max_wait_ms = _int(props, RETRY_MAX_WAIT_MS, 8000, catalog)
        self._timeout = _int(props, REQUEST_TIMEOUT_MS, 60_000, catalog) / 1000
        self.session = self._session(props, auth=False)
        self._auth_manager: Any = None
        self._auth_manager_key: tuple[str | None, ...] = ()
        self._token_received_ms = 0
        self._token_expires_ms: int | None = None
        self.endpoints: frozenset[str] = frozenset()
        self.properties = self._fetch_config(props)
        self.session = self._session(self.properties, auth=True)

    # --- configuration ---------------------------------------------------------------

    @property
    def uri(self) -> str:
        return self.properties[URI].rstrip("/")

    @property
    def prefix(self) -> str:
        return self.properties.get(PREFIX, "").strip("/")

    @property
    def timeout_s(self) -> float:
        """How long one request may take (``rest.request-timeout-ms``)."""
        return float(self._timeout)

    @property
    def idempotency(self) -> bool:
        return bool(self.properties.get(IDEMPOTENCY_LIFETIME))

    def supports(self, endpoint: str) -> bool:
        """Whether the server lists ``endpoint`` (``"METHOD /v1/..."``) in its config."""
        return endpoint in self.endpoints

    def _fetch_config(self, props: dict[str, str]) -> dict[str, str]:
        params = {WAREHOUSE: props[WAREHOUSE]} if props.get(WAREHOUSE) else {}
        self.session = self._session(props, auth=True)
        resp = self.request("GET", "config", params=params, prefixed=False, what="read its config")
        body = resp.body if isinstance(resp.body, dict) else {}
        self.endpoints = frozenset(str(e) for e in body.get("endpoints") or ())
        merged = {str(k): str(v) for k, v in (body.get("defaults") or {}).items()}
        merged.update(props)
        merged.update({str(k): str(v) for k, v in (body.get("overrides") or {}).items()})
        return merged

    def _session(self, props: Mapping[str, str], *, auth: bool) -> Any:
        session = _redirect_without_secrets(self._requests.Session())
        session.headers["Content-Type"] = "application/json"
        session.headers["User-Agent"] = "stream_sink"
        session.headers[ACCESS_DELEGATION] = "vended-credentials"
        for key, value in props.items():
            if key.startswith(HEADER_PREFIX):
                session.headers[key[len(HEADER_PREFIX) :]] = value
        if auth:
            self._authenticate(session, props)
        return session

    def _public_session(self) -> Any:
        """A session for a URL of another origin than ``uri`` (an endpoint the server
        named): no auth, no secret header."""
        public = {k: v for k, v in self.properties.items() if not is_secret(k)}
        return self._session(public, auth=False)

    def _authenticate(self, session: Any, props: Mapping[str, str]) -> None:
        from stream_sink.io.sigv4 import SIGV4_ENABLED, SigV4Auth

        credential, token = props.get(CREDENTIAL), props.get(TOKEN)
        sigv4 = props.get(SIGV4_ENABLED, "false").strip().lower() == "true"
        if credential or token:
            manager = self._oauth_manager(props)
            session.auth = _Chain([manager, SigV4Auth(self.catalog, props)] if sigv4 else [manager])
        elif sigv4:
            session.auth = SigV4Auth(self.catalog, props)

    def _oauth_manager(self, props: Mapping[str, str]) -> Any:
        """pyiceberg's OAuth2 manager for ``props``. The one that authenticated the config
        request is kept when the server's defaults and overrides leave the properties it
        was made from unchanged: one token per catalog open, as Iceberg Java's catalog
        session reuses its config session's token."""
        key = _auth_key(props)
        if self._auth_manager is None or key != self._auth_manager_key:
            self._auth_manager, self._auth_manager_key = self._new_oauth_manager(props), key
        from pyiceberg.catalog.rest.auth import AuthManagerAdapter  # importable: a manager exists

        return AuthManagerAdapter(self._auth_manager)

    def _new_oauth_manager(self, props: Mapping[str, str]) -> Any:
        """A new pyiceberg OAuth2 manager (it fetches its token now)."""
        try:
            from pyiceberg.catalog.rest.auth import LegacyOAuth2AuthManager
        except ImportError as e:
            raise InvalidOptionError(
                f"catalog {self.catalog!r}: {CREDENTIAL}/{TOKEN} need pyiceberg's auth managers: "
                "pip install 'stream_sink[rest]'"
            ) from e
        params = {SCOPE: props.get(SCOPE, "catalog")}
        params.update({k: props[k] for k in ("audience", "resource") if props.get(k)})
        auth_url = props.get(OAUTH2_SERVER_URI) or f"{props[URI].rstrip('/')}/v1/oauth/tokens"
        token_session = self._requests.Session()
        token_session.hooks["response"].append(self._note_token)
        try:
            return LegacyOAuth2AuthManager(
                session=token_session,
                auth_url=auth_url,
                credential=props.get(CREDENTIAL),
                initial_token=props.get(TOKEN),
                optional_oauth_params=params,
            )
        except Exception as e:  # pyiceberg's OAuthError or a connection error
            raise CatalogAuthError(
                f"catalog {self.catalog!r}: the OAuth2 server at {auth_url} refused the client "
                f"credentials in property {CREDENTIAL!r} ({type(e).__name__}: "
                f"{scrub(str(e), props)}); check the property (client_id:client_secret) and "
                f"{SCOPE!r}"
            ) from None

    def _note_token(self, response: Any, *args: Any, **kwargs: Any) -> None:
        """When a token the OAuth2 server handed out expires (its ``expires_in``)."""
        if not response.ok:
            return
        try:
            expires_in = response.json().get("expires_in")
        except (ValueError, AttributeError):
            expires_in = None
        self._token_received_ms = now_ms()
        self._token_expires_ms = (
            self._token_received_ms + int(float(expires_in) * 1000) if expires_in else None
        )

    def executor_headers(self) -> dict[str, str] | None:
        """Headers with which a Spark executor may renew vended credentials at this server,
        or None when that would need a long-lived secret (SigV4 keys, a static ``token``,
        a secret ``header.*``): see the module's invariants."""
        from stream_sink.io.sigv4 import SIGV4_ENABLED

        props = self.properties
        if props.get(SIGV4_ENABLED, "false").strip().lower() == "true":
            return None
        headers = {ACCESS_DELEGATION: "vended-credentials"}
        for key, value in props.items():
            if key.startswith(HEADER_PREFIX):
                if is_secret(key):
                    return None
                headers[key[len(HEADER_PREFIX) :]] = value
        if props.get(CREDENTIAL) and self._auth_manager is not None:
            if not self._token_for_executors():
                return None
            headers["Authorization"] = str(self._auth_manager.auth_header())
        elif props.get(CREDENTIAL) or props.get(TOKEN):
            return None
        return headers

    def _token_for_executors(self) -> bool:
        """Renew the bearer token first when it is due (as storage credentials are);
        False when it expired and cannot be renewed now (executors then get none)."""
        expires = self._token_expires_ms
        if expires is None:
            return True
        if now_ms() < expires - refresh_margin_ms({}, expires - self._token_received_ms):
            return True
        try:
            self._refresh_token()
        except CatalogAuthError as e:
            log.warning("%s; executors get no way to renew storage credentials", e)
            return now_ms() < expires
        return True

    # --- requests ------------------------------------------------------------------------

    def url(self, path: str, *, prefixed: bool = True) -> str:
        parts = [self.uri, "v1"]
        if prefixed and self.prefix:
            parts.append(self.prefix)
        return "/".join([*parts, path])

    def resolve(self, endpoint: str) -> str:
        """An endpoint the server named: a URL as it is, a path below ``uri``."""
        if "://" in endpoint:
            return endpoint
        return f"{self.uri}/{endpoint.lstrip('/')}"

    def namespace_path(self, namespace: tuple[str, ...]) -> str:
        sep = self.properties.get(NAMESPACE_SEPARATOR, "%1F")
        return sep.join(quote(p, safe="") for p in namespace)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        prefixed: bool = True,
        what: str,
        retry: bool | None = None,
        headers: Mapping[str, str] | None = None,
        absolute: str | None = None,
    ) -> Response:
        """Send one request; 2xx returns, anything else raises (see :func:`raise_for`).
        ``retry`` (default: reads only) retries transport failures and 429/502/503/504.
        ``absolute``: an endpoint the server named (a URL, or a path resolved against
        ``uri`` as Iceberg Java resolves it), sent instead of ``path``."""
        retryable = method in _READS if retry is None else retry
        url = self.resolve(absolute) if absolute else self.url(path, prefixed=prefixed)
        session = self.session if same_origin(url, self.uri) else self._public_session()
        refreshed = False

        def attempt(_: int) -> Response:
            nonlocal refreshed
            raw = self._send(session, method, url, body, params, headers)
            if (
                raw.status_code in (401, 419)
                and self._auth_manager is not None
                and session is self.session
                and not refreshed
            ):
                refreshed = True
                self._refresh_token()
                raw = self._send(session, method, url, body, params, headers)
            if raw.status_code in _TRANSIENT_STATUS:
                raise TryAgain(str(raw.status_code), raw)
            return self._response(raw, method, url, what)

        # one attempt unless retryable, so an error escaping the loop ran them all
        backoff = self._backoff(retryable)
        try:
            return retrying(attempt, backoff, self._transient, on_retry=self._log_retry(what))
        except TryAgain as e:
            return self._response(e.seen, method, url, what)
        except self._requests.RequestException as e:
            raise CatalogUnavailableError(
                f"catalog {self.catalog!r}: could not {what}: {method} {url} failed "
                f"({type(e).__name__}) after {backoff.max_attempts} attempts"
            ) from None

    def _send(
        self,
        session: Any,
        method: str,
        url: str,
        body: Any,
        params: Mapping[str, str] | None,
        headers: Mapping[str, str] | None,
    ) -> Any:
        return session.request(
            method,
            url,
            json=body,
            params=params,
            headers=dict(headers or {}),
            timeout=self._timeout,
        )

    def _backoff(self, retryable: bool) -> Backoff:
        """``rest.max-retries`` retries of a retryable request, none of another."""
        return Backoff(
            first_s=0.1,
            max_s=self._max_wait_ms / 1000,
            max_attempts=max(0, self._max_retries) + 1 if retryable else 1,
        )

    def _transient(self, e: Exception) -> bool:
        """A dropped connection, a timeout, or a 429/502/503/504 answer."""
        return isinstance(e, (TryAgain, self._requests.RequestException))

    def _log_retry(self, what: str) -> OnRetry:
        def log_retry(e: Exception, retry: int, wait_s: float) -> None:
            cause = e.cause if isinstance(e, TryAgain) else type(e).__name__
            log.warning(
                "catalog %r: %s: %s; retry %d of %d in %.0f ms",
                self.catalog,
                what,
                cause,
                retry,
                self._max_retries,
                wait_s * 1000,
            )

        return log_retry

    def _refresh_token(self) -> None:
        refresh = getattr(self._auth_manager, "_refresh_token", None)
        if refresh is not None:
            try:
                refresh()
            except Exception as e:
                raise CatalogAuthError(
                    f"catalog {self.catalog!r}: refreshing the OAuth2 token failed "
                    f"({type(e).__name__}); check property {CREDENTIAL!r}"
                ) from None

    def _response(self, raw: Any, method: str, url: str, what: str) -> Response:
        try:
            body = raw.json() if raw.content else None
        except ValueError:
            body = raw.text
        resp = Response(raw.status_code, body, dict(raw.headers))
        if 200 <= raw.status_code < 300:
            return resp
        raise raise_for(self.catalog, resp, method, url, what, self.properties)

    def idempotency_headers(self) -> dict[str, str]:
        """A fresh key for one logical mutation (reused on its retries)."""
        return {"Idempotency-Key": str(uuid.uuid4())} if self.idempotency else {}

    def close(self) -> None:
        self.session.close()


def _redirect_without_secrets(session: Any) -> Any:
    """``session``, following a redirect to another origin without any secret header
    (``requests`` itself drops only ``Authorization`` there)."""
    rebuild = session.rebuild_auth

    def rebuild_auth(prepared: Any, response: Any) -> None:
        rebuild(prepared, response)
        if not same_origin(prepared.url, response.request.url):
            for name in [n for n in prepared.headers if is_secret(f"header.{n}")]:
                del prepared.headers[name]

    session.rebuild_auth = rebuild_auth
    return session


class _Chain:
    """Apply several ``requests`` auth handlers in order (bearer token, then SigV4)."""

    def __init__(self, handlers: list[Any]) -> None:
        self._handlers = handlers

    def __call__(self, request: Any) -> Any:
        for h in self._handlers:
            request = h(request)
        return request


def server_message(body: Any) -> tuple[str, str]:
    """(type, message) of an ``ErrorModel`` response, or of whatever the server sent."""
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            return str(err.get("type", "")), str(err.get("message", ""))
        if isinstance(err, str):
            return err, str(body.get("error_description", ""))
    text = str(body or "")
    title = re.search(r"<title>(.*?)</title>", text, re.S | re.I)  # an HTML error page
    return "", (title.group(1).strip() if title else text)[:500]


def raise_for(
    catalog: str, resp: Response, method: str, url: str, what: str, props: Mapping[str, str]
) -> Exception:
    """The exception a non-2xx answer becomes (the caller may map 404/409 further)."""
    kind, message = server_message(resp.body)
    message = scrub(message, props)
    said = f"{resp.status} {kind}: {message}".rstrip(": ")
    if resp.status in (401, 403):
        return CatalogAuthError(
            f"catalog {catalog!r} refused our credentials to {what} ({said}). Check the "
            f"catalog properties {CREDENTIAL!r}/{TOKEN!r} (OAuth2), or for SigV4 "
            "'rest.sigv4-enabled', 'rest.signing-name', 'rest.signing-region' and "
            "'client.access-key-id'/'client.secret-access-key'"
        )
    return CatalogRequestError(
        f"catalog {catalog!r}: could not {what}: {method} {url} answered {said}",
        status=resp.status,
        error_type=kind,
        server_message=message,
    )


def _auth_key(props: Mapping[str, str]) -> tuple[str | None, ...]:
    """The properties an OAuth2 manager is made from (see ``_oauth_manager``)."""
    keys = (URI, CREDENTIAL, TOKEN, SCOPE, OAUTH2_SERVER_URI, "audience", "resource")
    return tuple(props.get(k) for k in keys)


def _int(props: Mapping[str, str], key: str, default: int, catalog: str) -> int:
    raw = props.get(key)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidOptionError(
            f"catalog {catalog!r}: property {key}={raw!r} is not an integer"
        ) from None

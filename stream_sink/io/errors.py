"""Turning raw storage failures into errors that name the path.

pyarrow and RocksDB report a full disk or a read-only directory without the file
(``OSError: [Errno 28] Error writing bytes to file``, ``IO error: …``). Code that knows
which file it writes wraps the step in :func:`io_failure`; callers higher up add the
table, the batch and what it means for the data, chaining this error.

An object store's failures (``OSError: … AWS Error NETWORK_CONNECTION … curlCode: 7``)
become :class:`RemoteStorageError` through :func:`object_store_errors`, naming the
location, the endpoint, the bucket and what to check (:func:`object_store_failure`).
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar
from urllib.parse import urlparse

from stream_sink.exceptions import RemoteStorageError, SinkIOError, StreamSinkError
from stream_sink.io.credentials import expires_at_ms, is_expired_credentials

log = logging.getLogger(__name__)


def describe(e: BaseException) -> str:
    """``e`` in one line, with the errno's name when there is one."""
    code = getattr(e, "errno", None)
    name = errno.errorcode.get(code, "") if isinstance(code, int) else ""
    text = str(e).strip() or type(e).__name__
    return f"{name}: {text}" if name and name not in text else text


@contextmanager
def io_failure(what: str, path: str) -> Iterator[None]:
    """Re-raise an OSError inside as SinkIOError(``<what> <path> failed: <cause>``)."""
    try:
        yield
    except StreamSinkError:
        raise
    except OSError as e:
        raise SinkIOError(f"{what} {path} failed: {describe(e)}") from e


def quietly(action: Callable[[], object], what: str) -> None:
    """Run a cleanup ``action``; a failure only logs, so it never hides the error
    that made the cleanup necessary."""
    try:
        action()
    except Exception as e:
        log.warning("%s failed: %s", what, describe(e))


_UNREACHABLE = (
    "network_connection",
    "curlcode",
    "could not connect",
    "couldn't connect",
    "connection refused",
    "could not resolve",
    "timed out",
    "timeout",
)
_DENIED = (
    "accessdenied",
    "access_denied",
    "access denied",
    "invalid_access_key_id",
    "forbidden",
    "invalidaccesskeyid",
    "signaturedoesnotmatch",
    "http response code: 403",
)
_NO_BUCKET = ("nosuchbucket", "bucket does not exist", "the specified bucket does not exist")


def object_store_failure(
    e: BaseException, doing: str, location: str, properties: Mapping[str, str]
) -> RemoteStorageError:
    """A RemoteStorageError for ``e`` raised while ``doing`` ``location`` on S3: names the
    endpoint (``s3.endpoint``, else ``AWS_ENDPOINT_URL``, else AWS itself) and the bucket,
    says which of them failed when the store's text tells, and what to check."""
    endpoint = properties.get("s3.endpoint") or os.environ.get("AWS_ENDPOINT_URL")
    where = f"S3 endpoint {endpoint}" if endpoint else "AWS S3 (no s3.endpoint set)"
    bucket = urlparse(location).netloc or location.split("/", 1)[0]
    text = str(e).lower()
    if any(w in text for w in _UNREACHABLE):
        why = f"cannot reach the {where} for bucket {bucket!r}"
        check = (
            "check that s3.endpoint (or AWS_ENDPOINT_URL) is the store's URL, with http:// "
            "or https:// and the right port, and that the store is running and reachable"
        )
    elif any(w in text for w in _NO_BUCKET):
        why = f"bucket {bucket!r} does not exist at the {where}"
        check = f"create bucket {bucket!r}, or check the bucket in the location"
    elif is_expired_credentials(e, expires_at_ms(properties)):
        expired = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(_expiry_s(properties)))
        why = f"the {where} refused access to bucket {bucket!r}: the credentials expired"
        check = (
            f"they expired at {expired} (s3.session-token-expires-at-ms), and renewing them "
            "did not help or was not possible here (executors renew only for a catalog with "
            "OAuth2 client credentials or no authentication: see 'Vended credentials and "
            "their renewal' in docs/catalogs.md); a micro-batch refused this way is written "
            "again when the query restarts"
        )
    elif any(w in text for w in _DENIED):
        why = f"the {where} refused access to bucket {bucket!r}"
        check = (
            "check the credentials (s3.access-key-id and s3.secret-access-key, or the "
            f"AWS_* environment) and that they may use bucket {bucket!r}; and s3.region"
        )
    else:
        why = f"the {where} failed a request on bucket {bucket!r}"
        check = "check s3.endpoint, the bucket, the credentials and s3.region"
    return RemoteStorageError(f"{doing} {location} failed: {why}; {check} ({describe(e)})")


def _expiry_s(properties: Mapping[str, str]) -> float:
    return (expires_at_ms(properties) or 0) / 1000


class _Renewable(Protocol):
    def refresh_after(self, error: BaseException | str, used: Mapping[str, str]) -> bool: ...


class _Store(Protocol):
    scheme: str
    properties: Mapping[str, str]

    @property
    def current_properties(self) -> Mapping[str, str]: ...

    @property
    def credentials(self) -> _Renewable | None: ...


_Method = TypeVar("_Method", bound=Callable[..., Any])


def object_store_errors(doing: str) -> Callable[[_Method], _Method]:
    """Decorate a ``FileIO`` method taking a location first: on an object store, an
    OSError other than a missing or existing file becomes :func:`object_store_failure`.
    Local files keep their errors (their callers add the path; see :func:`io_failure`).

    A FileIO with renewable credentials that is refused for expired ones renews them
    and runs the method once more (a refused request changed nothing)."""

    def decorate(method: _Method) -> _Method:
        @functools.wraps(method)
        def wrapper(self: _Store, location: str, *args: Any, **kwargs: Any) -> Any:
            renewed = False
            while True:
                used = self.current_properties
                try:
                    return method(self, location, *args, **kwargs)
                except (StreamSinkError, FileNotFoundError, FileExistsError):
                    raise
                except OSError as e:
                    missing_bucket = any(w in str(e).lower() for w in _NO_BUCKET)
                    if self.scheme != "s3" or (_is_not_found_text(e) and not missing_bucket):
                        raise
                    creds = self.credentials
                    if not renewed and creds is not None and creds.refresh_after(e, used):
                        renewed = True
                        log.info("%s %s: credentials renewed, trying again", doing, location)
                        continue
                    raise object_store_failure(e, doing, location, used) from e

        return wrapper  # type: ignore[return-value]

    return decorate


def _is_not_found_text(e: OSError) -> bool:
    text = str(e).lower()
    return "not found" in text or "no such file" in text or "does not exist" in text

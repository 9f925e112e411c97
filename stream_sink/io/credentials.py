"""Short-lived storage credentials (a catalog's vended credentials) and their refresh.

A REST catalog that vends credentials answers a table load with ``s3.access-key-id``,
``s3.secret-access-key``, ``s3.session-token`` and ``s3.session-token-expires-at-ms``
(Iceberg's names). :class:`RefreshingCredentials` holds the current set and a way to get
a new one (the catalog's credentials endpoint, or loading the table again), and is what
a :class:`~stream_sink.io.FileIO` asks for its properties.

Invariants:
- Refresh ahead of expiry: credentials are renewed once less than the margin is left,
  the margin being ``s3.session-token-refresh-margin-ms`` when set, else the smaller of
  five minutes (Iceberg Java's prefetch) and half the lifetime they were handed out with,
  so credentials of any lifetime are used for at least half of it.
- Refresh on refusal: a request refused because its credentials expired
  (:func:`is_expired_credentials`) is sent once more with renewed credentials; a second
  refusal is reported as it is.
- Nothing here prints a credential: reprs and messages name keys, never values.
- Pickled (to a Spark executor, inside a FileIO), the current properties travel, with
  the catalog's :class:`~stream_sink.io.renewal.Renewal` when it offers one (a request
  an executor can send without a long-lived secret); the driver's way to renew them,
  its catalog client, never travels.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from stream_sink.exceptions import InvalidOptionError

if TYPE_CHECKING:
    from stream_sink.io.renewal import Renewal

log = logging.getLogger(__name__)

ACCESS_KEY_ID = "s3.access-key-id"
SECRET_ACCESS_KEY = "s3.secret-access-key"
SESSION_TOKEN = "s3.session-token"
EXPIRES_AT_MS = "s3.session-token-expires-at-ms"
REFRESH_MARGIN_MS = "s3.session-token-refresh-margin-ms"
REFRESH_ENDPOINT = "client.refresh-credentials-endpoint"
REFRESH_ENABLED = "client.refresh-credentials-enabled"

_PREFETCH_MS = 5 * 60 * 1000
_EXPIRED_WORDS = (
    "expiredtoken",
    "expired_token",
    "token has expired",
    "token is expired",
    "request has expired",
)
# Refusals a store gives for credentials it no longer knows: SeaweedFS answers an expired
# session token with InvalidAccessKeyId (its session is gone), and a HEAD request carries
# no error body at all, so a bare 403 is taken for expiry only once the expiry has passed.
_UNKNOWN_KEY_WORDS = ("invalidaccesskeyid", "invalid_access_key_id")
_DENIED_WORDS = ("access_denied", "accessdenied", "access denied", "forbidden", "code: 403")


def now_ms() -> int:
    return int(time.time() * 1000)


def expires_at_ms(properties: Mapping[str, str]) -> int | None:
    """When the session credentials in ``properties`` expire (epoch ms); None without."""
    raw = properties.get(EXPIRES_AT_MS)
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise InvalidOptionError(
            f"storage property {EXPIRES_AT_MS}={raw!r} is not epoch milliseconds; the "
            "catalog that vended these credentials sent it"
        ) from None


def is_vended(properties: Mapping[str, str]) -> bool:
    """Session credentials with an expiry: the kind a catalog vends and can renew."""
    return bool(properties.get(SESSION_TOKEN)) and expires_at_ms(properties) is not None


def refresh_margin_ms(properties: Mapping[str, str], lifetime_ms: int) -> int:
    """How long before expiry to renew (see the module's invariants)."""
    raw = properties.get(REFRESH_MARGIN_MS)
    if raw is not None:
        try:
            margin = int(raw)
        except ValueError:
            raise InvalidOptionError(
                f"property {REFRESH_MARGIN_MS}={raw!r} is not a number of milliseconds"
            ) from None
        if margin < 0:
            raise InvalidOptionError(f"property {REFRESH_MARGIN_MS}={raw!r} is negative")
        return margin
    return min(_PREFETCH_MS, max(lifetime_ms, 0) // 2)


def is_expired_credentials(error: BaseException | str, expires_at: int | None) -> bool:
    """Whether a storage failure is a refusal of expired credentials: the store says the
    token expired, or it refuses the key or the request once ``expires_at`` has passed."""
    text = str(error).lower()
    if any(w in text for w in _EXPIRED_WORDS):
        return True
    if expires_at is None or now_ms() < expires_at:
        return False
    return any(w in text for w in _UNKNOWN_KEY_WORDS + _DENIED_WORDS)


Fetch = Callable[[], Mapping[str, str]]
"""Returns the storage properties with new credentials (the catalog's answer merged
over the catalog's own properties)."""

RenewalFor = Callable[[], "Renewal | None"]
"""The catalog's request an executor may send to renew the credentials (None: there is
none that needs no long-lived secret); asked each time the FileIO is pickled."""


class RefreshingCredentials:
    """The current storage properties of one table's FileIO, renewed through ``fetch``.

    Thread-safe: concurrent callers see one renewal, not one each."""

    def __init__(
        self,
        properties: Mapping[str, str],
        fetch: Fetch,
        *,
        what: str,
        renewal: RenewalFor | None = None,
        received_ms: int | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._fetch = fetch
        self.what = what
        self.renewal = renewal
        self._properties = dict(properties)
        self._received_ms = now_ms() if received_ms is None else received_ms
        self.refreshes = 0

    def __repr__(self) -> str:
        return f"RefreshingCredentials({self.what!r}, expires_at_ms={self.expires_at})"

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError(
            "RefreshingCredentials does not travel; pickle the FileIO, which carries its "
            "current properties and the catalog's Renewal, if any"
        )

    @property
    def expires_at(self) -> int | None:
        return expires_at_ms(self._properties)

    @property
    def received_ms(self) -> int:
        """When the current credentials were handed out (the margin counts from it)."""
        return self._received_ms

    def current(self) -> Mapping[str, str]:
        """The properties to use now, renewed first when expiry is within the margin. A
        renewal that fails while the credentials have not expired yet is logged and tried
        again at the next use (the catalog may be back by then); once they have expired,
        its error is raised."""
        with self._lock:
            expires = self.expires_at
            if expires is not None:
                margin = refresh_margin_ms(self._properties, expires - self._received_ms)
                if now_ms() >= expires - margin:
                    try:
                        self._renew("they expire soon")
                    except Exception as e:
                        if now_ms() >= expires:
                            raise
                        log.warning(
                            "%s: renewing storage credentials failed (%s: %s); the current "
                            "ones are valid until %s and are used meanwhile",
                            self.what,
                            type(e).__name__,
                            e,
                            expires,
                        )
            return dict(self._properties)

    def refresh_after(self, error: BaseException | str, used: Mapping[str, str]) -> bool:
        """Renew after ``error``, a failure of a request sent with the properties ``used``,
        when it is a refusal of expired credentials; True when the caller should send it
        once more. Credentials renewed meanwhile by another caller count as renewed."""
        if not is_expired_credentials(error, expires_at_ms(used)):
            return False
        with self._lock:
            if self._properties.get(SESSION_TOKEN) == used.get(SESSION_TOKEN):
                self._renew("the store refused them as expired")
        return True

    def _renew(self, why: str) -> None:
        fresh = dict(self._fetch())
        if not fresh.get(SESSION_TOKEN):
            log.warning("%s: renewing credentials (%s) brought no session token", self.what, why)
        self._properties = fresh
        self._received_ms = now_ms()
        self.refreshes += 1
        log.info(
            "%s: storage credentials renewed (%s); new ones expire at %s",
            self.what,
            why,
            self.expires_at,
        )

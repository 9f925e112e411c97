"""When vended (short-lived) storage credentials are renewed, and what a FileIO carries to
an executor. The renewal against a real catalog that vends them is in
``tests/rest/test_vended_credentials.py`` and ``tests/spark/test_vended_credentials_sink.py``."""

from __future__ import annotations

import pickle
import threading

import pytest

from stream_sink.exceptions import InvalidOptionError
from stream_sink.io.credentials import (
    EXPIRES_AT_MS,
    REFRESH_MARGIN_MS,
    SESSION_TOKEN,
    RefreshingCredentials,
    expires_at_ms,
    is_expired_credentials,
    is_vended,
    now_ms,
    refresh_margin_ms,
)
from stream_sink.io.fileio import FileIO
from stream_sink.io.renewal import Renewal, answer_properties, storage_credentials

SEAWEED_EXPIRED = (
    "When initiating multiple part upload for key 'ns/t/data/x.parquet' in bucket "
    "'warehouse': AWS Error INVALID_ACCESS_KEY_ID during CreateMultipartUpload operation: "
    "The access key ID you provided does not exist in our records."
)
HEAD_DENIED = (
    "When reading information for key 'ns/t/data/x.parquet' in bucket 'warehouse': "
    "AWS Error ACCESS_DENIED during HeadObject operation: No response body."
)


def vended(token: str, expires_in_ms: int, **extra: str) -> dict[str, str]:
    return {
        "s3.access-key-id": "ASIA" + token,
        "s3.secret-access-key": "secret-" + token,
        SESSION_TOKEN: token,
        EXPIRES_AT_MS: str(now_ms() + expires_in_ms),
        **extra,
    }


class Catalog:
    """Hands out a new set of credentials each time it is asked, counting the asks."""

    def __init__(self, lifetime_ms: int) -> None:
        self.lifetime_ms = lifetime_ms
        self.asked = 0

    def fetch(self) -> dict[str, str]:
        self.asked += 1
        return vended(f"t{self.asked}", self.lifetime_ms)


def test_expiry_and_whether_credentials_are_vended() -> None:
    assert expires_at_ms({EXPIRES_AT_MS: "1795790352412"}) == 1795790352412
    assert expires_at_ms({}) is None
    assert is_vended(vended("a", 1000))
    assert not is_vended({"s3.access-key-id": "AKIA", "s3.secret-access-key": "s"})
    with pytest.raises(InvalidOptionError, match="epoch milliseconds"):
        expires_at_ms({EXPIRES_AT_MS: "tomorrow"})


def test_renewal_margin_is_five_minutes_or_half_the_lifetime() -> None:
    assert refresh_margin_ms({}, 3_600_000) == 300_000  # Iceberg Java's prefetch
    assert refresh_margin_ms({}, 20_000) == 10_000  # short-lived: half of it
    assert refresh_margin_ms({REFRESH_MARGIN_MS: "0"}, 20_000) == 0
    with pytest.raises(InvalidOptionError, match="negative"):
        refresh_margin_ms({REFRESH_MARGIN_MS: "-1"}, 20_000)


def test_which_refusals_mean_expired_credentials() -> None:
    past, future = now_ms() - 1, now_ms() + 60_000
    assert is_expired_credentials("AWS Error ExpiredToken: token has expired", future)
    # an unknown key or a bare 403 means expiry only once the expiry has passed
    assert is_expired_credentials(SEAWEED_EXPIRED, past)
    assert is_expired_credentials(HEAD_DENIED, past)
    assert not is_expired_credentials(SEAWEED_EXPIRED, future)
    assert not is_expired_credentials(HEAD_DENIED, None)
    assert not is_expired_credentials("AWS Error NO_SUCH_BUCKET", past)


def test_fresh_credentials_are_kept_and_due_ones_renewed() -> None:
    catalog = Catalog(lifetime_ms=60_000)
    creds = RefreshingCredentials(vended("t0", 60_000), catalog.fetch, what="t")
    assert creds.current()[SESSION_TOKEN] == "t0" and catalog.asked == 0
    # 60 s left, renewed 2 minutes ahead: due now
    due_props = vended("t0", 60_000, **{REFRESH_MARGIN_MS: "120000"})
    due = RefreshingCredentials(due_props, catalog.fetch, what="t")
    assert due.current()[SESSION_TOKEN] == "t1" and catalog.asked == 1
    assert due.current()[SESSION_TOKEN] == "t1" and catalog.asked == 1


def test_a_refusal_renews_once_for_every_caller_that_used_the_expired_set() -> None:
    catalog = Catalog(lifetime_ms=60_000)
    old = vended("t0", -1)  # expired a millisecond ago
    creds = RefreshingCredentials(vended("t0", 60_000), catalog.fetch, what="t")
    retry: list[bool] = []
    threads = [
        threading.Thread(target=lambda: retry.append(creds.refresh_after(SEAWEED_EXPIRED, old)))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert retry == [True] * 8 and catalog.asked == 1
    assert not creds.refresh_after("AWS Error NO_SUCH_BUCKET", old)
    assert catalog.asked == 1


def test_an_executor_gets_the_current_credentials_and_not_the_way_to_renew_them() -> None:
    catalog = Catalog(lifetime_ms=60_000)
    props = vended("t0", 60_000, **{"s3.endpoint": "http://127.0.0.1:1", "uri": "http://c"})
    io = FileIO.for_location(
        "s3://b/t", props, RefreshingCredentials(props, catalog.fetch, what="t")
    )
    shipped = pickle.loads(pickle.dumps(io))
    assert shipped.credentials is None
    assert shipped.properties == {k: v for k, v in props.items() if k.startswith("s3.")}
    with pytest.raises(TypeError, match="does not travel"):
        pickle.dumps(io.credentials)
    assert "secret-t0" not in repr(io) and "t0" not in repr(io.credentials)


def test_an_executor_copy_carries_the_catalogs_renewal_and_hides_its_token() -> None:
    props = vended("t0", 60_000, **{"s3.endpoint": "http://store"})
    renewal = Renewal(
        "http://catalog/v1/pre/namespaces/ns/tables/t?snapshots=all",
        "table",
        "s3://b/t",
        what="catalog 'c' table ns.t",
        headers=(("Authorization", "Bearer tok-abcdefgh"),),
    )
    credentials = RefreshingCredentials(
        props, Catalog(60_000).fetch, what="t", renewal=lambda: renewal
    )
    io = FileIO.for_location("s3://b/t", props, credentials)
    shipped = pickle.loads(pickle.dumps(io))
    assert shipped.credentials is not None and shipped.credentials.renewal is not None
    assert shipped.credentials.renewal() == renewal
    assert shipped.current_properties == io.current_properties  # not due: no request
    assert "tok-abcdefgh" not in repr(shipped) + repr(shipped.credentials) + repr(renewal)
    assert "snapshots" not in repr(renewal)  # the URL without its query
    again = pickle.loads(pickle.dumps(io))  # a later task of the same executor process
    assert again.credentials is shipped.credentials  # starts from what it renewed


def test_a_renewal_answer_is_read_as_the_driver_reads_it() -> None:
    creds = {"prefix": "s3://b/", "config": {SESSION_TOKEN: "new"}}
    table = {"config": {"s3.endpoint": "http://store"}, "storage-credentials": [creds]}
    assert answer_properties(table, "table", "s3://b/t") == {
        "s3.endpoint": "http://store",
        SESSION_TOKEN: "new",
    }
    assert answer_properties(table, "credentials", "s3://b/t") == {SESSION_TOKEN: "new"}
    assert answer_properties(None, "credentials", "s3://b/t") == {}


def test_the_longest_storage_credentials_prefix_applies() -> None:
    body = {
        "storage-credentials": [
            {"prefix": "s3://warehouse/", "config": {SESSION_TOKEN: "bucket"}},
            {"prefix": "s3://warehouse/ns/t", "config": {SESSION_TOKEN: "table"}},
            {"prefix": "s3://other/", "config": {SESSION_TOKEN: "other"}},
        ]
    }
    assert storage_credentials(body, "s3://warehouse/ns/t")[SESSION_TOKEN] == "table"
    assert storage_credentials(body, "s3://warehouse/ns/u")[SESSION_TOKEN] == "bucket"
    assert storage_credentials(body, "s3://elsewhere/x") == {}
    assert storage_credentials({}, "s3://warehouse/ns/t") == {}


def test_a_failed_renewal_keeps_valid_credentials_and_raises_for_expired_ones() -> None:
    def unreachable() -> dict[str, str]:
        raise ConnectionError("catalog down")

    due = vended("t0", 60_000, **{REFRESH_MARGIN_MS: "120000"})
    assert RefreshingCredentials(due, unreachable, what="t").current()[SESSION_TOKEN] == "t0"
    expired = RefreshingCredentials(vended("t0", -1), unreachable, what="t")
    with pytest.raises(ConnectionError):
        expired.current()

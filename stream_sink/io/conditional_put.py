"""Put-if-absent on S3: a PUT with ``If-None-Match: *`` (S3 conditional writes).

pyarrow's S3FileSystem cannot send that header, so this goes through boto3 (the
``s3`` extra: ``pip install 'stream_sink[s3]'``), configured from the same FileIO
properties as the S3 filesystem (``s3.endpoint``, ``s3.access-key-id``,
``s3.secret-access-key``, ``s3.region``; the AWS environment and credential chain
otherwise).

Outcomes of the PUT:
- 200: this PUT created the object: True.
- 412 PreconditionFailed: an object already exists under the key: False, unless it
  holds exactly our bytes (the client retried our PUT after a lost response and the
  first attempt had landed): True.
- 409 ConditionalRequestConflict: another conditional write to the key was in flight.
  The key is re-read (HEAD): when it exists the 412 rule applies, otherwise the same
  PUT is retried after a short backoff.

Invariants: of any number of writers putting one key, exactly one gets True, and no
object is ever replaced. A store that ignores the header would silently overwrite:
the first put into a bucket in each process probes the store (a conditional PUT of a
probe object twice: the second must be refused) and raises UnsupportedError when it
does not honour the condition, before anything else is written.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from stream_sink.exceptions import SinkIOError, UnsupportedError
from stream_sink.io.endpoint import endpoint_url
from stream_sink.retry import Backoff, TryAgain, is_try_again, retrying

CONFLICT_ATTEMPTS = 10
"""How often a 409 (a concurrent conditional write in flight) is retried."""
MIN_BACKOFF_S = 0.02
MAX_BACKOFF_S = 1.0
PROBE_PREFIX = ".put-if-absent-probe-"


class PutOutcome(Enum):
    CREATED = "created"
    EXISTS = "exists"  # 412
    CONFLICT = "conflict"  # 409
    NOT_SUPPORTED = "not-supported"  # 501 or the header refused


def classify(response: Mapping[str, Any]) -> PutOutcome | None:
    """What an S3 error response (botocore's ``ClientError.response``) means for a
    conditional PUT; None for any other error."""
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    code = response.get("Error", {}).get("Code")
    if status == 412 or code == "PreconditionFailed":
        return PutOutcome.EXISTS
    if status == 409 or code == "ConditionalRequestConflict":
        return PutOutcome.CONFLICT
    if status == 501 or code == "NotImplemented":
        return PutOutcome.NOT_SUPPORTED
    return None


def put_if_absent(
    properties: Mapping[str, str], bucket: str, key: str, data: bytes, where: str
) -> bool:
    """Create ``bucket/key`` holding ``data`` unless it exists (see the module docstring);
    ``where`` names the object in errors."""
    store = _store(properties)
    _check_store(store, bucket, key, where)

    def attempt(_: int) -> bool:
        outcome = _put(store, bucket, key, data, where)
        if outcome is PutOutcome.CREATED:
            return True
        if outcome is PutOutcome.EXISTS or _exists(store.client, bucket, key, where):
            return _holds(store.client, bucket, key, data, where)
        raise TryAgain("409 ConditionalRequestConflict")

    backoff = Backoff(MIN_BACKOFF_S, MAX_BACKOFF_S, CONFLICT_ATTEMPTS, jitter=(0.5, 1.5))
    try:
        return retrying(attempt, backoff, is_try_again)
    except TryAgain:
        raise SinkIOError(
            f"conditional PUT of {where}: the store reported a concurrent conditional write "
            f"(409 ConditionalRequestConflict) {CONFLICT_ATTEMPTS} times in a row; nothing "
            "was written by this attempt, retry"
        ) from None


def _put(store: _S3, bucket: str, key: str, data: bytes, where: str) -> PutOutcome:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        store.client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        return PutOutcome.CREATED
    except ClientError as e:
        outcome = classify(e.response)
        if outcome is PutOutcome.NOT_SUPPORTED:
            raise UnsupportedError(_unsupported(store.endpoint, bucket)) from e
        if outcome is None:
            raise SinkIOError(f"conditional PUT of {where} failed: {e}") from e
        return outcome
    except BotoCoreError as e:
        raise SinkIOError(
            f"conditional PUT of {where} failed: {e}; whether the object was written is "
            "unknown (a retry of the commit finds out)"
        ) from e


def _exists(client: Any, bucket: str, key: str, where: str) -> bool:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        client.head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as e:
        if e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
            return False
        raise SinkIOError(f"reading {where} failed: {e}") from e
    except BotoCoreError as e:
        raise SinkIOError(f"reading {where} failed: {e}") from e


def _holds(client: Any, bucket: str, key: str, data: bytes, where: str) -> bool:
    """Whether the existing object is exactly ``data`` (our own earlier attempt)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    except (BotoCoreError, ClientError) as e:
        raise SinkIOError(f"reading {where} failed: {e}") from e
    return bool(body == data)


# --- the store must honour If-None-Match ------------------------------------------------

_PROBED: set[tuple[str | None, str]] = set()
_PROBE_LOCK = threading.Lock()


def _check_store(store: _S3, bucket: str, key: str, where: str) -> None:
    """Probe once per (endpoint, bucket) and process that a conditional PUT of an existing
    key is refused; raise UnsupportedError when the store overwrites instead."""
    marker = (store.endpoint, bucket)
    with _PROBE_LOCK:
        if marker in _PROBED:
            return
    directory = key.rsplit("/", 1)[0] + "/" if "/" in key else ""
    probe = f"{directory}{PROBE_PREFIX}{uuid.uuid4().hex}"
    try:
        first = _put(store, bucket, probe, b"1", where)
        second = _put(store, bucket, probe, b"2", where)
    finally:
        _delete_quietly(store.client, bucket, probe)
    if first is not PutOutcome.CREATED or second is not PutOutcome.EXISTS:
        raise UnsupportedError(_unsupported(marker[0], bucket))
    with _PROBE_LOCK:
        _PROBED.add(marker)


def _unsupported(endpoint: str | None, bucket: str) -> str:
    store = endpoint or "AWS S3"
    return (
        f"s3://{bucket} at {store} does not honour conditional writes (a PUT with "
        "If-None-Match: * replaced an existing object or was refused), so two writers "
        "could both write the same Delta log version; nothing was committed. Use a store "
        "with conditional writes (AWS S3, MinIO and other S3-compatible stores that "
        "implement If-None-Match on PUT) or a local/POSIX path"
    )


def _delete_quietly(client: Any, bucket: str, key: str) -> None:
    with contextlib.suppress(Exception):  # a leftover probe is harmless; readers ignore it
        client.delete_object(Bucket=bucket, Key=key)


# --- the client ----------------------------------------------------------------------


@dataclass(frozen=True)
class _S3:
    client: Any  # a boto3 S3 client (thread-safe)
    endpoint: str | None  # a custom endpoint; None for AWS itself


_STORES: dict[tuple[tuple[str, str], ...], _S3] = {}
_STORE_LOCK = threading.Lock()


def _store(properties: Mapping[str, str]) -> _S3:
    key = tuple(sorted(properties.items()))
    with _STORE_LOCK:
        store = _STORES.get(key)
        if store is None:
            store = _STORES[key] = _make_store(properties)
            while len(_STORES) > 32:  # renewed credentials make new keys: drop the oldest
                del _STORES[next(iter(_STORES))]
        return store


def _make_store(properties: Mapping[str, str]) -> _S3:
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise UnsupportedError(
            "put-if-absent on s3:// (the Delta log's commit files) is a PUT with "
            "If-None-Match: *, sent with boto3, which is not installed: "
            "pip install 'stream_sink[s3]'"
        ) from None
    endpoint = endpoint_url(properties)
    settings: dict[str, Any] = {"retries": {"mode": "standard", "max_attempts": 5}}
    if endpoint:  # MinIO and other S3-compatible stores want path-style addressing
        settings["s3"] = {"addressing_style": "path"}
    kwargs = {
        "endpoint_url": endpoint,
        "region_name": properties.get("s3.region") or os.environ.get("AWS_REGION", "us-east-1"),
        "aws_access_key_id": properties.get("s3.access-key-id"),
        "aws_secret_access_key": properties.get("s3.secret-access-key"),
        "aws_session_token": properties.get("s3.session-token"),
    }
    session = boto3.session.Session()  # one per client: creating clients is not thread-safe
    config = Config(**settings)
    client = session.client("s3", config=config, **{k: v for k, v in kwargs.items() if v})
    return _S3(client, endpoint)

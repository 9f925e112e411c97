"""Operator state layout of the committer: keys and the staged-checkpoint value.

Keys: ``pending/<batch id>`` and ``staged/<checkpoint id>``, ids as 20-digit zero-padded
decimals so that a prefix scan yields them in numeric order. The job id lives in the
state's metadata area (``META_JOB_ID``).

A staged value lists ``(batch id, serialized DeltaManifests)`` for every batch of the
checkpoint in ascending batch order; a batch that produced no files has empty bytes
(its id is still recorded: it was processed and must count as covered once committed).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from stream_sink.exceptions import CorruptStateError, UnsupportedError, ValidationError

PENDING_PREFIX = b"pending/"
STAGED_PREFIX = b"staged/"
_WIDTH = 20

STAGED_VERSION = 1
_MAGIC = b"SSST"
_HEAD = struct.Struct(">HI")
_ITEM = struct.Struct(">qI")

StagedBatches = tuple[tuple[int, bytes], ...]


def pending_key(batch_id: int) -> bytes:
    return PENDING_PREFIX + _id(batch_id)


def staged_key(checkpoint_id: int) -> bytes:
    return STAGED_PREFIX + _id(checkpoint_id)


def id_of(key: bytes, prefix: bytes) -> int:
    """The id in a key made by :func:`pending_key` / :func:`staged_key`."""
    try:
        return int(key[len(prefix) :])
    except ValueError:
        raise CorruptStateError(f"operator state key {key!r} does not end in an id") from None


def _id(value: int) -> bytes:
    if value < 0 or value >= 10**_WIDTH:
        raise ValidationError(f"batch and checkpoint ids must be in 0..10^20-1, got {value}")
    return b"%020d" % value


def encode_staged(batches: Sequence[tuple[int, bytes]]) -> bytes:
    """``SSST | version | count | (batch id int64, length uint32, bytes)*``."""
    parts = [_MAGIC, _HEAD.pack(STAGED_VERSION, len(batches))]
    for batch_id, payload in batches:
        parts.append(_ITEM.pack(batch_id, len(payload)))
        parts.append(payload)
    return b"".join(parts)


def decode_staged(data: bytes, *, where: str) -> StagedBatches:
    if not data.startswith(_MAGIC) or len(data) < len(_MAGIC) + _HEAD.size:
        raise CorruptStateError(f"{where}: not a staged checkpoint value")
    version, count = _HEAD.unpack_from(data, len(_MAGIC))
    if version > STAGED_VERSION:
        raise UnsupportedError(
            f"{where}: staged checkpoint format {version} is newer than this stream_sink "
            f"reads ({STAGED_VERSION})"
        )
    pos = len(_MAGIC) + _HEAD.size
    out = []
    try:
        for _ in range(count):
            batch_id, length = _ITEM.unpack_from(data, pos)
            pos += _ITEM.size
            if pos + length > len(data):
                raise ValueError("entry runs past the end")
            out.append((batch_id, bytes(data[pos : pos + length])))
            pos += length
    except (struct.error, ValueError) as e:
        raise CorruptStateError(f"{where}: truncated staged checkpoint value ({e})") from e
    if pos != len(data):
        raise CorruptStateError(f"{where}: {len(data) - pos} trailing bytes")
    return tuple(out)

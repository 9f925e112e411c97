"""Operator state layout of the committer: keys and the staged-checkpoint value.

Keys: ``pending/<batch id>`` and ``staged/<checkpoint id>``, ids as 20-digit zero-padded
decimals so that a prefix scan yields them in numeric order. The job id lives in the
state's metadata area (``META_JOB_ID``).

A staged value lists ``(batch id, serialized StagedManifests)`` for every batch of the
checkpoint in ascending batch order; a batch that produced no files has empty bytes
(its id is still recorded: it was processed and must count as covered once committed).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from stream_sink.envelope import Envelope
from stream_sink.exceptions import CorruptStateError, ValidationError

PENDING_PREFIX = b"pending/"
STAGED_PREFIX = b"staged/"
_WIDTH = 20

STAGED_VERSION = 1
STAGED_VALUE = Envelope(b"SSST", STAGED_VERSION, "staged checkpoint value", CorruptStateError)
_COUNT = struct.Struct(">I")
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
    """``SSST | version (envelope) | count uint32 | (batch id int64, length uint32, bytes)*``."""
    parts = [_COUNT.pack(len(batches))]
    for batch_id, payload in batches:
        parts.append(_ITEM.pack(batch_id, len(payload)))
        parts.append(payload)
    return STAGED_VALUE.wrap(b"".join(parts))


def decode_staged(raw: bytes, *, where: str) -> StagedBatches:
    data = STAGED_VALUE.payload(raw, where=where)
    if len(data) < _COUNT.size:
        raise CorruptStateError(f"{where}: truncated staged checkpoint value (no count)")
    (count,) = _COUNT.unpack_from(data, 0)
    pos = _COUNT.size
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

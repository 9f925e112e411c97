"""A write batch: puts, deletes and metadata puts applied together or not at all."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

from stream_sink.exceptions import ValidationError


class OpKind(Enum):
    PUT = "put"
    DELETE = "delete"
    PUT_META = "put-meta"


@dataclass(frozen=True)
class StateOp:
    """One operation; ``value`` is None only for deletes, ``key`` is the meta name's bytes
    for metadata puts."""

    kind: OpKind
    key: bytes
    value: bytes | None = None


class StateWriteBatch:
    """Operations to apply in order as one atomic, durable write.

    Later operations on the same key win, as if applied one after another. Filling a
    batch changes nothing in any backend; only ``OperatorStateBackend.write`` does.
    """

    def __init__(self) -> None:
        self._ops: list[StateOp] = []

    def put(self, key: bytes, value: bytes) -> StateWriteBatch:
        self._ops.append(StateOp(OpKind.PUT, _as_bytes(key, "key"), _as_bytes(value, "value")))
        return self

    def delete(self, key: bytes) -> StateWriteBatch:
        self._ops.append(StateOp(OpKind.DELETE, _as_bytes(key, "key")))
        return self

    def put_meta(self, name: str, value: bytes) -> StateWriteBatch:
        """Set a metadata entry (e.g. the job id) in the same atomic write."""
        self._ops.append(StateOp(OpKind.PUT_META, _meta_name(name), _as_bytes(value, "value")))
        return self

    @property
    def operations(self) -> tuple[StateOp, ...]:
        return tuple(self._ops)

    def __len__(self) -> int:
        return len(self._ops)

    def __iter__(self) -> Iterator[StateOp]:
        return iter(tuple(self._ops))


RESERVED_META = frozenset({"format", "sink-id"})
"""Metadata names the backend owns; callers cannot overwrite them."""


def _meta_name(name: str) -> bytes:
    if not name or not isinstance(name, str):
        raise ValidationError(f"state metadata name must be a non-empty string, got {name!r}")
    if name in RESERVED_META:
        raise ValidationError(f"state metadata name {name!r} is reserved")
    return name.encode("utf-8")


def _as_bytes(data: bytes, what: str) -> bytes:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ValidationError(f"state {what} must be bytes, got {type(data).__name__}")
    return bytes(data)

"""The one versioned envelope and its policy: foreign bytes are corruption, a newer
version is unsupported (never corruption), every older version is read."""

from __future__ import annotations

import pytest

from stream_sink.envelope import Envelope
from stream_sink.exceptions import CorruptionError, CorruptStateError, UnsupportedError

THING = Envelope(b"SSXX", 2, "thing", CorruptStateError)


def test_round_trip_at_every_supported_version() -> None:
    assert THING.unwrap(THING.wrap(b"payload"), where="w") == (2, b"payload")
    assert THING.unwrap(THING.wrap(b"", version=1), where="w") == (1, b"")
    assert THING.wrap(b"p").startswith(b"SSXX\x00\x02")


def test_foreign_or_short_bytes_are_the_callers_corruption_error() -> None:
    for raw in (b"", b"SSXX\x00", b"XXXX\x00\x01p", b"SSXX\x00\x00p"):
        with pytest.raises(CorruptStateError, match="at key k"):
            THING.unwrap(raw, where="at key k")


def test_a_newer_version_is_unsupported_never_corruption() -> None:
    with pytest.raises(UnsupportedError, match="format version 3") as info:
        THING.payload(b"SSXX\x00\x03payload", where="w")
    assert not isinstance(info.value, CorruptionError)

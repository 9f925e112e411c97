"""Foreign, corrupt or newer state is refused with an error naming the directory.

Tests stream_sink.state.encoding: the versioned value encoding.
Tests stream_sink.state.layout: what a state directory holds."""

from __future__ import annotations

import os
import re

import pytest
import rocksdict

from stream_sink.exceptions import CorruptStateError, UnsupportedError
from stream_sink.state import (
    StateWriteBatch,
    decode_value,
    encode_value,
    open_state_backend,
)
from stream_sink.state.statelog import LOG_HEADER


def _named(path: str) -> str:
    return re.escape(path)


@pytest.mark.parametrize("kind", ["rocksdb", "memory", "auto"])
def test_directory_of_unrelated_files_is_refused_and_left_alone(
    tmp_path: object, kind: str
) -> None:
    path = os.path.join(str(tmp_path), "photos")
    os.makedirs(path)
    with open(os.path.join(path, "cat.jpg"), "wb") as f:
        f.write(b"\xff\xd8 not state")
    with pytest.raises(CorruptStateError, match=_named(path) + ".*cat.jpg"):
        open_state_backend(kind, path)  # type: ignore[arg-type]
    assert os.listdir(path) == ["cat.jpg"]


def test_a_file_where_the_state_directory_should_be_is_refused(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "state")
    with open(path, "w") as f:
        f.write("x")
    with pytest.raises(CorruptStateError, match=_named(path) + " is a file"):
        open_state_backend("rocksdb", path)


def test_rocksdb_with_garbage_current_file_is_refused(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "db")
    os.makedirs(path)
    with open(os.path.join(path, "CURRENT"), "wb") as f:
        f.write(os.urandom(40))
    with pytest.raises(CorruptStateError, match=_named(path) + ".*cannot be opened"):
        open_state_backend("rocksdb", path)


def test_rocksdb_without_our_marker_is_refused(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "foreign")
    db = rocksdict.Rdict(path)
    db["user"] = {"some": "object"}
    db.close()
    with pytest.raises(CorruptStateError, match=_named(path) + ".*without the stream_sink"):
        open_state_backend("rocksdb", path)


def test_rocksdb_value_with_garbage_bytes_names_the_key(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "db")
    open_state_backend("rocksdb", path).close()
    raw = rocksdict.Rdict(path, rocksdict.Options(raw_mode=True))
    raw.put(b"dpending/3", b"\x00garbage")
    raw.close()
    with open_state_backend("rocksdb", path) as b:
        with pytest.raises(CorruptStateError, match=_named(path) + r".*pending/3"):
            b.get(b"pending/3")
        with pytest.raises(CorruptStateError, match="pending/3"):
            list(b.scan())


def test_state_written_by_a_newer_format_is_unsupported_not_corrupt(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "db")
    open_state_backend("rocksdb", path).close()
    raw = rocksdict.Rdict(path, rocksdict.Options(raw_mode=True))
    raw.put(b"mformat", encode_value(99, b"stream_sink operator state"))
    raw.close()
    with pytest.raises(UnsupportedError, match=_named(path) + ".*format version 99"):
        open_state_backend("rocksdb", path)


def test_rocksdb_directory_is_not_opened_as_memory_state(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "db")
    open_state_backend("rocksdb", path).close()
    with pytest.raises(CorruptStateError, match=_named(path) + ".*RocksDB"):
        open_state_backend("memory", path)
    with open_state_backend("auto", path) as b:
        assert b.kind == "rocksdb"


def test_memory_log_of_garbage_is_refused(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "mem")
    os.makedirs(path)
    with open(os.path.join(path, "state.log"), "wb") as f:
        f.write(b"GIF89a" + os.urandom(100))
    with pytest.raises(CorruptStateError, match=_named(path) + ".*state.log"):
        open_state_backend("memory", path)


def test_memory_log_torn_tail_is_dropped_but_earlier_writes_kept(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "mem")
    with open_state_backend("memory", path) as b:
        b.write(StateWriteBatch().put(b"a", b"1").put(b"b", b"2"))
    log = os.path.join(path, "state.log")
    intact = os.path.getsize(log)
    with open(log, "ab") as f:
        f.write(b"\x00\x00\x01\x00\x12\x34")  # an append cut short by a crash
    with open_state_backend("memory", path) as b:
        assert list(b.scan()) == [(b"a", b"1"), (b"b", b"2")]
        b.put(b"c", b"3")
    assert os.path.getsize(log) > intact
    with open_state_backend("memory", path) as b:
        assert [k for k, _ in b.scan()] == [b"a", b"b", b"c"]


def test_memory_log_damaged_in_the_middle_is_corrupt(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "mem")
    with open_state_backend("memory", path) as b:
        b.put(b"a", b"1" * 50)
        b.put(b"b", b"2" * 50)
    log = os.path.join(path, "state.log")
    with open(log, "rb") as f:
        data = bytearray(f.read())
    data[len(LOG_HEADER) + 12] ^= 0xFF  # inside the first record, two more follow it
    with open(log, "wb") as f:
        f.write(bytes(data))
    with pytest.raises(CorruptStateError, match="checksum mismatch"):
        open_state_backend("memory", path)


def test_value_encoding_round_trips_and_detects_foreign_bytes() -> None:
    assert decode_value(encode_value(3, b"payload"), where="x") == (3, b"payload")
    assert decode_value(encode_value(1, b""), where="x") == (1, b"")
    with pytest.raises(CorruptStateError, match="somewhere"):
        decode_value(b'{"json": 1}', where="somewhere")
    with pytest.raises(CorruptStateError, match="empty"):
        decode_value(b"", where="somewhere")

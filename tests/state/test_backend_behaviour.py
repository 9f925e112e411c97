"""The behaviour every state backend shares; each test runs against RocksDB and in-memory.

Tests stream_sink.state.backend: the behaviour every backend shares.
Tests stream_sink.state.batch: write batches applied whole or not at all.
Tests stream_sink.state.factory: backends opened by name.
Tests stream_sink.state.memory_backend: the in-memory backend."""

from __future__ import annotations

import os
import re
from collections.abc import Callable

import pytest

from stream_sink.exceptions import (
    AlreadyExistsError,
    CorruptStateError,
    StateLockedError,
    StreamSinkError,
    ValidationError,
)
from stream_sink.state import (
    META_JOB_ID,
    OperatorStateBackend,
    StateWriteBatch,
    restore_from_snapshot,
)

Opener = Callable[..., OperatorStateBackend]


def test_missing_directory_is_created_empty_and_reported_fresh(
    open_backend: Opener, state_dir: str
) -> None:
    with open_backend() as b:
        assert b.was_created
        assert b.is_empty()
        assert b.get(b"k") is None
        assert list(b.scan()) == []
    assert os.path.isdir(state_dir)
    with open_backend() as b:
        assert not b.was_created


def test_get_returns_what_put_stored_and_delete_removes_it(open_backend: Opener) -> None:
    with open_backend() as b:
        b.put(b"pending/1", b"\x00\xffraw")
        assert b.get(b"pending/1") == b"\x00\xffraw"
        assert not b.is_empty()
        b.delete(b"pending/1")
        assert b.get(b"pending/1") is None
        b.delete(b"never-there")  # deleting a missing key is not an error


def test_scan_yields_only_the_prefix_in_key_order(open_backend: Opener) -> None:
    with open_backend() as b:
        for key in [b"staged/2", b"pending/10", b"pending/02", b"pending/1", b"pendinh"]:
            b.put(key, key.upper())
        assert list(b.scan(b"pending/")) == [
            (b"pending/02", b"PENDING/02"),
            (b"pending/1", b"PENDING/1"),
            (b"pending/10", b"PENDING/10"),
        ]
        assert [k for k, _ in b.scan()] == [
            b"pending/02",
            b"pending/1",
            b"pending/10",
            b"pendinh",
            b"staged/2",
        ]


def test_operations_of_one_batch_appear_together_after_reopen(open_backend: Opener) -> None:
    with open_backend() as b:
        b.write(StateWriteBatch().put(b"pending/1", b"a").put(b"pending/2", b"b"))
        batch = (
            StateWriteBatch()
            .put(b"staged/2", b"manifests")
            .delete(b"pending/1")
            .delete(b"pending/2")
            .put_meta(META_JOB_ID, b"query-1")
        )
        b.write(batch)
    with open_backend() as b:
        assert list(b.scan()) == [(b"staged/2", b"manifests")]
        assert b.get_meta(META_JOB_ID) == b"query-1"


def test_later_operation_on_a_key_in_one_batch_wins(open_backend: Opener) -> None:
    with open_backend() as b:
        b.write(StateWriteBatch().put(b"k", b"1").delete(b"k").put(b"j", b"1").put(b"j", b"2"))
        assert b.get(b"k") is None
        assert b.get(b"j") == b"2"


def test_many_writes_survive_close_and_reopen(open_backend: Opener) -> None:
    with open_backend() as b:
        for i in range(200):
            b.put(b"key/%03d" % i, b"v%d" % i)
        for i in range(0, 200, 2):
            b.delete(b"key/%03d" % i)
    with open_backend() as b:
        keys = [k for k, _ in b.scan(b"key/")]
    assert keys == [b"key/%03d" % i for i in range(1, 200, 2)]


def test_metadata_is_separate_from_keys(open_backend: Opener) -> None:
    with open_backend(sink_id="db.events") as b:
        assert b.get_meta(META_JOB_ID) is None
        b.put_meta(META_JOB_ID, b"q-1")
        b.put(b"job-id", b"user key")
        assert b.get_meta(META_JOB_ID) == b"q-1"
        assert list(b.scan()) == [(b"job-id", b"user key")]
        assert b.sink_id == "db.events"
        with pytest.raises(ValidationError, match="reserved"):
            b.put_meta("sink-id", b"other")


def test_snapshot_restores_to_an_equal_state(open_backend: Opener, tmp_path: object) -> None:
    base = str(tmp_path)
    with open_backend(sink_id="s1") as b:
        for i in range(50):
            b.put(b"k%02d" % i, os.urandom(64))
        b.put_meta(META_JOB_ID, b"q-7")
        before = list(b.scan())
        b.snapshot_to(f"{base}/snap")
        b.put(b"after-snapshot", b"x")  # not part of the snapshot
    restore_from_snapshot(f"{base}/snap", f"{base}/restored")
    with open_backend(f"{base}/restored", sink_id="s1") as r:
        assert list(r.scan()) == before
        assert r.get_meta(META_JOB_ID) == b"q-7"
        assert not r.was_created


def test_restore_refuses_to_overwrite_existing_state(
    open_backend: Opener, tmp_path: object
) -> None:
    base = str(tmp_path)
    with open_backend() as b:
        b.put(b"k", b"v")
        b.snapshot_to(f"{base}/snap")
    with open_backend(f"{base}/other") as o:
        o.put(b"other", b"v")
    with pytest.raises(AlreadyExistsError, match="other"):
        restore_from_snapshot(f"{base}/snap", f"{base}/other")


def test_second_open_of_an_open_directory_is_refused(open_backend: Opener, state_dir: str) -> None:
    with open_backend() as b, pytest.raises(StateLockedError, match=re.escape(state_dir)):
        open_backend()
    assert b.location == state_dir
    with open_backend():  # the lock was released by close()
        pass


def test_state_of_another_sink_is_refused_naming_both(open_backend: Opener, state_dir: str) -> None:
    with open_backend(sink_id="orders") as b:
        b.put(b"k", b"v")
    with pytest.raises(CorruptStateError, match=r"'orders'.*'payments'") as err:
        open_backend(sink_id="payments")
    assert state_dir in str(err.value)


def test_closed_backend_refuses_use(open_backend: Opener) -> None:
    b = open_backend()
    b.close()
    b.close()
    with pytest.raises(StreamSinkError, match="closed"):
        b.get(b"k")


def test_keys_and_values_must_be_bytes(open_backend: Opener) -> None:
    with open_backend() as b, pytest.raises(ValidationError, match="bytes"):
        b.put("text", b"v")  # type: ignore[arg-type]


def test_scan_does_not_see_writes_made_while_iterating(open_backend: Opener) -> None:
    with open_backend() as b:
        for key in (b"p/1", b"p/2", b"p/3"):
            b.put(key, b"old")
        seen = []
        for key, value in b.scan(b"p/"):
            seen.append((key, value))
            b.put(b"p/9", b"new")
            b.put(b"p/3", b"changed")
        assert seen == [(b"p/1", b"old"), (b"p/2", b"old"), (b"p/3", b"old")]
        assert b.get(b"p/3") == b"changed"

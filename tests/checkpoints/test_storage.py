"""Completed checkpoints on disk: complete, list, retain, ignore incomplete, restore.

Tests stream_sink.checkpoints.storage: completed checkpoints on disk.
Tests stream_sink.checkpoints.metadata: what each one records.
Tests stream_sink.io.private: checkpoints and state readable by their owner only."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator

import pytest

from stream_sink.checkpoints import CheckpointMetadata, CheckpointStorage
from stream_sink.exceptions import (
    AlreadyExistsError,
    CheckpointError,
    CorruptStateError,
    StreamSinkError,
    UnsupportedError,
    ValidationError,
)
from stream_sink.state import META_JOB_ID, OperatorStateBackend, open_state_backend

SINK = "db.events"


@pytest.fixture(params=["rocksdb", "memory"])
def backend(
    request: pytest.FixtureRequest, tmp_path: os.PathLike[str]
) -> Iterator[OperatorStateBackend]:
    b = open_state_backend(request.param, os.path.join(str(tmp_path), "state", SINK), sink_id=SINK)
    b.put_meta(META_JOB_ID, b"query-1")
    yield b
    b.close()


@pytest.fixture
def base(tmp_path: os.PathLike[str]) -> str:
    return os.path.join(str(tmp_path), "checkpoints")


def _meta(checkpoint_id: int, batches: tuple[int, ...] | None = None) -> CheckpointMetadata:
    return CheckpointMetadata.for_batches(
        job_id="query-1",
        sink_id=SINK,
        batch_ids=batches or (checkpoint_id,),
        created_ms=1_700_000_000_000 + checkpoint_id,
    )


def _complete(storage: CheckpointStorage, backend: OperatorStateBackend, cid: int) -> None:
    backend.put(b"staged/%d" % cid, b"manifests of %d" % cid)
    storage.complete(cid, _meta(cid), backend)


def test_complete_writes_state_and_metadata_under_the_sink(
    base: str, backend: OperatorStateBackend
) -> None:
    storage = CheckpointStorage(base, SINK, retain=3)
    backend.put(b"pending/4", b"files")
    done = storage.complete(5, _meta(5, (4, 5)), backend)
    chk = os.path.join(base, SINK, "chk-5")
    assert done.location == chk and done.checkpoint_id == 5
    assert done.state_location.startswith(chk + "/state-")
    assert os.listdir(done.state_location)
    with open(os.path.join(chk, "_metadata")) as f:
        doc = json.load(f)
    assert doc["format-version"] == 1
    assert doc["batch-ids"] == [4, 5] and doc["first-batch-id"] == 4
    assert doc["job-id"] == "query-1" and doc["sink-id"] == SINK
    assert doc["state"]["backend"] == backend.kind
    assert sorted(os.listdir(chk)) == sorted(["_metadata", os.path.basename(done.state_location)])


def test_checkpoint_without_metadata_is_ignored(base: str, backend: OperatorStateBackend) -> None:
    storage = CheckpointStorage(base, SINK)
    _complete(storage, backend, 1)
    backend.snapshot_to(os.path.join(base, SINK, "chk-2", "state-abc"))  # crashed before _metadata
    assert [c.checkpoint_id for c in storage.list_completed()] == [1]
    latest = storage.latest()
    assert latest is not None and latest.checkpoint_id == 1
    with pytest.raises(CheckpointError, match=re.escape(os.path.join(base, SINK, "chk-2"))):
        storage.read(2)


def test_failed_snapshot_leaves_no_complete_checkpoint(
    base: str, backend: OperatorStateBackend
) -> None:
    storage = CheckpointStorage(base, SINK)
    backend.close()
    with pytest.raises(StreamSinkError, match="closed"):
        storage.complete(3, _meta(3), backend)
    assert storage.latest() is None


def test_retention_keeps_the_newest_and_drops_stale_incomplete(
    base: str, backend: OperatorStateBackend
) -> None:
    storage = CheckpointStorage(base, SINK, retain=2)
    _complete(storage, backend, 1)
    os.makedirs(os.path.join(base, SINK, "chk-2", "state-dead"))  # a crash left it
    for cid in (3, 4, 5):
        _complete(storage, backend, cid)
    os.makedirs(os.path.join(base, SINK, "chk-9", "state-live"))  # newer: left alone
    storage.apply_retention()
    assert [c.checkpoint_id for c in storage.list_completed()] == [4, 5]
    assert sorted(os.listdir(os.path.join(base, SINK))) == ["chk-4", "chk-5", "chk-9"]


def test_latest_is_found_again_after_a_restart(base: str, backend: OperatorStateBackend) -> None:
    for cid in (2, 7, 11):
        _complete(CheckpointStorage(base, SINK), backend, cid)
    latest = CheckpointStorage(base, SINK).latest()  # a new process, new object
    assert latest is not None
    assert latest.checkpoint_id == 11  # numeric, not string, order
    assert latest.metadata == _meta(11)
    assert CheckpointStorage(base, "other.sink").latest() is None


def test_restore_state_brings_back_the_state_as_of_the_checkpoint(
    base: str, backend: OperatorStateBackend, tmp_path: os.PathLike[str]
) -> None:
    storage = CheckpointStorage(base, SINK)
    backend.put(b"pending/1", b"a")
    _complete(storage, backend, 2)
    expected = list(backend.scan())
    backend.put(b"pending/3", b"after the checkpoint")
    target = os.path.join(str(tmp_path), "restored", SINK)
    latest = storage.latest()
    assert latest is not None
    with storage.restore_state(latest, target) as restored:
        assert restored.kind == backend.kind
        assert list(restored.scan()) == expected
        assert restored.get_meta(META_JOB_ID) == b"query-1"
        restored.put(b"pending/3", b"new")  # usable read-write
    with pytest.raises(AlreadyExistsError, match=re.escape(target)):
        storage.restore_state(latest, target)


def test_checkpoint_outlives_the_state_it_was_taken_from(
    base: str, backend: OperatorStateBackend, tmp_path: os.PathLike[str]
) -> None:
    """The snapshot is taken in place on a local disk: it must not depend on the live
    state's files, which later writes, compactions and a lost directory remove."""
    storage = CheckpointStorage(base, SINK, retain=1)
    for cid in range(1, 6):
        _complete(storage, backend, cid)
    expected = list(backend.scan())
    for i in range(200):  # later writes and deletes: flushes and compactions
        backend.put(b"pending/%d" % i, b"x" * 1000)
        backend.delete(b"pending/%d" % i)
    backend.close()
    shutil.rmtree(os.path.join(str(tmp_path), "state"))  # the live state is lost
    latest = storage.latest()
    assert latest is not None and latest.checkpoint_id == 5
    assert [c.checkpoint_id for c in storage.list_completed()] == [5]
    target = os.path.join(str(tmp_path), "restored", SINK)
    with storage.restore_state(latest, target) as restored:
        assert list(restored.scan()) == expected


def test_completing_the_same_checkpoint_again_replaces_its_state(
    base: str, backend: OperatorStateBackend, tmp_path: os.PathLike[str]
) -> None:
    storage = CheckpointStorage(base, SINK)
    first = storage.complete(4, _meta(4), backend)
    backend.put(b"staged/4", b"second attempt")
    second = storage.complete(4, _meta(4), backend)
    assert second.state_location != first.state_location
    assert not os.path.exists(first.state_location)
    target = os.path.join(str(tmp_path), "r")
    with storage.restore_state(storage.read(4), target) as restored:
        assert restored.get(b"staged/4") == b"second attempt"


def test_corrupt_metadata_names_the_file(base: str, backend: OperatorStateBackend) -> None:
    storage = CheckpointStorage(base, SINK)
    _complete(storage, backend, 1)
    path = os.path.join(base, SINK, "chk-1", "_metadata")
    with open(path, "w") as f:
        f.write('{"format-version": 1, "checkpoint-id": ')
    with pytest.raises(CorruptStateError, match=re.escape(path) + ".*not valid JSON"):
        storage.latest()
    with open(path, "w") as f:
        json.dump({"format-version": 1, "checkpoint-id": 1}, f)
    with pytest.raises(CorruptStateError, match=re.escape(path) + ".*missing field"):
        storage.read(1)


@pytest.mark.parametrize(
    "text",
    ["[" * 100_000 + "]" * 100_000, '{"format-version": ' + "9" * 5000 + "}"],
    ids=["nested past the recursion limit", "a 5000-digit version"],
)
def test_crafted_metadata_names_the_file(
    base: str, backend: OperatorStateBackend, text: str
) -> None:
    storage = CheckpointStorage(base, SINK)
    _complete(storage, backend, 1)
    path = os.path.join(base, SINK, "chk-1", "_metadata")
    with open(path, "w") as f:
        f.write(text)
    with pytest.raises(CorruptStateError, match=re.escape(path) + ".*not valid JSON"):
        storage.latest()


def test_metadata_from_a_newer_format_is_refused(base: str, backend: OperatorStateBackend) -> None:
    storage = CheckpointStorage(base, SINK)
    _complete(storage, backend, 1)
    path = os.path.join(base, SINK, "chk-1", "_metadata")
    with open(path) as f:
        doc = json.load(f)
    doc["format-version"] = 2
    with open(path, "w") as f:
        json.dump(doc, f)
    with pytest.raises(UnsupportedError, match=re.escape(path)):
        storage.read(1)


def test_metadata_must_belong_to_the_checkpoint_and_sink(
    base: str, backend: OperatorStateBackend
) -> None:
    storage = CheckpointStorage(base, SINK)
    with pytest.raises(CheckpointError, match="metadata is for checkpoint 6"):
        storage.complete(5, _meta(6), backend)
    other = CheckpointMetadata.for_batches(job_id="q", sink_id="other", batch_ids=[5], created_ms=0)
    with pytest.raises(CheckpointError, match="'other'"):
        storage.complete(5, other, backend)


def test_metadata_json_round_trip_and_invariants() -> None:
    meta = _meta(9, (3, 5, 9))
    assert CheckpointMetadata.from_json(meta.to_json(), where="x") == meta
    assert (meta.first_batch_id, meta.last_batch_id) == (3, 9)
    with pytest.raises(ValidationError, match="last batch id"):
        CheckpointMetadata(8, "q", SINK, 3, 9, (3, 9), 0)
    with pytest.raises(ValidationError, match="strictly increasing"):
        CheckpointMetadata(9, "q", SINK, 3, 9, (5, 3, 9), 0)


@pytest.mark.parametrize("bad", ["", "../up", "a/b", ".hidden"])
def test_sink_id_must_be_a_plain_name(base: str, bad: str) -> None:
    with pytest.raises(ValidationError, match="sink id"):
        CheckpointStorage(base, bad)


def _modes(root: str) -> dict[str, int]:
    """Every directory and file under ``root`` (itself included) and its permissions."""
    out = {root: os.stat(root).st_mode & 0o777}
    for d, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            out[os.path.join(d, name)] = os.stat(os.path.join(d, name)).st_mode & 0o777
    return out


def test_checkpoints_and_restored_state_are_the_owners_only(
    base: str, backend: OperatorStateBackend, tmp_path: os.PathLike[str]
) -> None:
    """They record the table and its catalog's settings: directories 0700, files 0600,
    the live state's directory 0700, whatever the umask lets others read."""
    from stream_sink.checkpoints import TableIdentity

    old = os.umask(0o022)
    try:
        storage = CheckpointStorage(base, SINK, retain=3)
        storage.record_table(TableIdentity("c", SINK, "uuid-1", {"type": "hadoop"}))
        _complete(storage, backend, 1)
        restored = os.path.join(str(tmp_path), "restored", SINK)
        storage.restore_state(storage.read(1), restored).close()
    finally:
        os.umask(old)
    sink_dir = os.path.join(base, SINK)
    wrong = {
        path: oct(mode)
        for path, mode in {**_modes(sink_dir), **_modes(restored)}.items()
        if mode != (0o700 if os.path.isdir(path) else 0o600)
    }
    assert wrong == {}
    live = os.path.join(str(tmp_path), "state", SINK)
    assert os.stat(live).st_mode & 0o777 == 0o700

"""Snapshot expiry (Java's RemoveSnapshots) and manifest rewriting: which snapshots
stay (count, age, refs and their own limits), which files go (only those no retained
snapshot references), and the rows every retained snapshot reads.

Tests stream_sink.table.expire: snapshot expiry.
Tests stream_sink.table.rewrite_manifests: manifest rewriting."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pyarrow as pa
import pytest
from compaction import commit_compaction, live_files, plan_compaction

from stream_sink.catalogs import load_catalog
from stream_sink.exceptions import CorruptMetadataError, ValidationError
from stream_sink.table.manifest import ManifestContent, read_manifest, read_manifest_list
from stream_sink.table.snapshots import SnapshotRef
from stream_sink.tables import IcebergTable

ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("data", pa.string())])
FAR_FUTURE = int(time.time() * 1000) + 10**9


def rows(*ids: int, tag: str = "v") -> pa.Table:
    return pa.table({"id": list(ids), "data": [f"{tag}{i}" for i in ids]}, schema=ARROW)


@pytest.fixture
def table(tmp_path: Path) -> IcebergTable:
    catalog = load_catalog("ex", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    return catalog.create_table("db.t", ARROW, identifier_fields=["id"])


def read(table: IcebergTable, snapshot_id: int | None = None) -> list[tuple[int, str]]:
    t = table.refresh().scan(snapshot_id=snapshot_id).to_arrow()
    return sorted(zip(t["id"].to_pylist(), t["data"].to_pylist(), strict=True))


def referenced(table: IcebergTable) -> set[str]:
    """Every file a snapshot of the table needs: lists, manifests, live files."""
    out: set[str] = set()
    for snap in table.refresh().snapshots():
        out.add(snap.manifest_list)
        for m in read_manifest_list(table.io, snap.manifest_list):
            out.add(m.manifest_path)
            out |= {e.data_file.file_path for e in read_manifest(table.io, m) if e.is_live}
    return out


def set_ref(table: IcebergTable, name: str, ref: SnapshotRef) -> None:
    meta = table.refresh().metadata.with_ref(name, ref)
    table.catalog.commit_metadata(
        table.identifier, table.metadata_location, meta, base_metadata=table.metadata
    )
    table.refresh()


def test_retain_last_keeps_the_newest_and_deletes_only_unreferenced_files(
    table: IcebergTable,
) -> None:
    for i in range(5):
        table.append(rows(i))
    newest = [s.snapshot_id for s in table.snapshots()[3:]]
    expired_lists = [s.manifest_list for s in table.snapshots()[:3]]
    result = table.new_expire_snapshots().expire_older_than(FAR_FUTURE).retain_last(2).commit()
    assert result.snapshots_expired == 3
    assert [s.snapshot_id for s in table.refresh().snapshots()] == newest
    assert result.deleted_manifest_lists == 3
    assert result.deleted_data_files == 0  # every appended file is still live
    assert not any(os.path.exists(p) for p in expired_lists)
    assert all(os.path.exists(p) for p in referenced(table))
    assert read(table) == [(i, f"v{i}") for i in range(5)]
    assert len(table.metadata.snapshot_log) == 2


def test_files_of_compacted_away_snapshots_are_deleted_by_kind(table: IcebergTable) -> None:
    table.append(rows(1, 2))
    table.upsert(rows(2, 3, tag="w"))
    plan = plan_compaction(table)
    commit_compaction(table, plan, use_starting_sequence_number=True)
    old = [f.file_path for f in plan.data_files + plan.delete_files]
    result = table.new_expire_snapshots().expire_older_than(FAR_FUTURE).retain_last(1).commit()
    assert result.snapshots_expired == 2
    assert result.deleted_data_files == 2
    assert result.deleted_equality_delete_files + result.deleted_position_delete_files == len(
        plan.delete_files
    )
    assert result.deleted_manifest_lists == 2 and result.deleted_manifests >= 2
    assert not any(os.path.exists(p) for p in old)
    assert all(os.path.exists(p) for p in referenced(table))
    assert read(table) == [(1, "v1"), (2, "w2"), (3, "w3")]


def test_age_limit_keeps_snapshots_newer_than_the_cut_off(table: IcebergTable) -> None:
    table.append(rows(1))
    table.append(rows(2))
    time.sleep(0.02)
    cut = int(time.time() * 1000)
    time.sleep(0.02)
    table.append(rows(3))
    table.append(rows(4))
    result = table.new_expire_snapshots().expire_older_than(cut).commit()
    assert result.snapshots_expired == 2
    assert all(s.timestamp_ms >= cut for s in table.snapshots())
    # nothing older than the default (5 days): nothing to do
    assert table.new_expire_snapshots().commit().snapshots_expired == 0


def test_refs_keep_their_snapshots_and_their_own_limits(table: IcebergTable) -> None:
    for i in range(3):
        table.append(rows(i))
    old = table.snapshots()[0]
    set_ref(table, "audit", SnapshotRef(old.snapshot_id, "tag"))
    set_ref(table, "stale", SnapshotRef(table.snapshots()[1].snapshot_id, "tag", max_ref_age_ms=1))
    head = table.current_snapshot()
    assert head is not None
    set_ref(table, "b", SnapshotRef(head.snapshot_id, "branch", min_snapshots_to_keep=3))
    for i in range(3, 6):
        table.append(rows(i))
    time.sleep(0.01)
    result = table.new_expire_snapshots().expire_older_than(FAR_FUTURE).retain_last(1).commit()
    assert result.removed_refs == ("stale",)
    kept = {s.snapshot_id for s in table.snapshots()}
    assert old.snapshot_id in kept  # the tag's snapshot
    assert {s.snapshot_id for s in table.metadata.ancestors(head.snapshot_id)} <= kept  # 3 of b
    assert table.current_snapshot() in table.snapshots()
    assert len(kept) == 4  # main's head, b's three (the tag's is one of them)
    assert read(table, old.snapshot_id) == [(0, "v0")]
    assert all(os.path.exists(p) for p in referenced(table))


def test_main_head_is_kept_however_old_and_ref_heads_cannot_be_expired(table: IcebergTable) -> None:
    table.append(rows(1))
    head = table.current_snapshot()
    assert head is not None
    result = table.new_expire_snapshots().expire_older_than(FAR_FUTURE).commit()
    assert result.snapshots_expired == 0
    with pytest.raises(ValidationError, match="points at it"):
        table.new_expire_snapshots().expire_snapshot_id(head.snapshot_id).commit()


def test_gc_disabled_refuses_expiry(tmp_path: Path) -> None:
    catalog = load_catalog("ex", type="hadoop", warehouse=str(tmp_path / "wh"))
    catalog.create_namespace("db")
    t = catalog.create_table("db.t", ARROW, properties={"gc.enabled": "false"})
    with pytest.raises(ValidationError, match=r"gc\.enabled"):
        t.new_expire_snapshots()


def test_corrupt_retained_manifest_stops_expiry_before_any_change(table: IcebergTable) -> None:
    table.append(rows(1))
    table.append(rows(2))
    head = table.current_snapshot()
    assert head is not None
    manifest = read_manifest_list(table.io, head.manifest_list)[0].manifest_path
    Path(manifest).write_bytes(b"Obj\x01garbage")
    location = table.metadata_location
    with pytest.raises(CorruptMetadataError, match=os.path.basename(manifest)):
        table.new_expire_snapshots().expire_older_than(FAR_FUTURE).commit()
    assert table.refresh().metadata_location == location


def test_random_histories_never_lose_a_referenced_file(table: IcebergTable) -> None:
    rng = random.Random(7)
    model: dict[int, str] = {}
    for step in range(14):
        action = rng.choice(["append", "upsert", "compact", "expire", "manifests"])
        if action == "append" or not model:
            ids = [step * 10 + i for i in range(3)]
            table.append(rows(*ids, tag=f"s{step}-"))
            model.update({i: f"s{step}-{i}" for i in ids})
        elif action == "upsert":
            ids = rng.sample(sorted(model), min(2, len(model)))
            table.upsert(rows(*ids, tag=f"u{step}-"))
            model.update({i: f"u{step}-{i}" for i in ids})
        elif action == "compact":
            commit_compaction(table, plan_compaction(table), rng.random() < 0.5)
        elif action == "manifests":
            table.new_rewrite_manifests().commit()
        else:
            table.new_expire_snapshots().expire_older_than(FAR_FUTURE).retain_last(
                rng.randint(1, 3)
            ).commit()
        assert all(os.path.exists(p) for p in referenced(table)), step
        assert read(table) == sorted(model.items()), step
        for snap in table.snapshots():
            read(table, snap.snapshot_id)  # every retained snapshot stays readable


def test_rewrite_manifests_clusters_and_keeps_entries(table: IcebergTable) -> None:
    props = {"commit.manifest-merge.enabled": "false"}
    meta = table.metadata.with_properties(props)
    table.catalog.commit_metadata(table.identifier, table.metadata_location, meta)
    for i in range(6):
        table.refresh().append(rows(i))
    before = table.refresh().current_snapshot()
    assert before is not None
    entries_before = {
        e.data_file.file_path: (e.snapshot_id, e.sequence_number)
        for f in [before]
        for m in read_manifest_list(table.io, f.manifest_list)
        for e in read_manifest(table.io, m)
    }
    assert len(read_manifest_list(table.io, before.manifest_list)) == 6
    snap = table.new_rewrite_manifests().commit()
    assert snap.operation == "replace"
    manifests = read_manifest_list(table.io, snap.manifest_list)
    assert [m.content for m in manifests] == [ManifestContent.DATA]
    after = {
        e.data_file.file_path: (e.snapshot_id, e.sequence_number)
        for e in read_manifest(table.io, manifests[0])
    }
    assert after == entries_before
    assert read(table) == [(i, f"v{i}") for i in range(6)]
    assert {f.file_path for f in live_files(table, snap)} == set(entries_before)


def test_a_branch_max_snapshot_age_overrides_the_age_the_call_gives(
    table: IcebergTable,
) -> None:
    for i in range(4):
        table.append(rows(i))
    head = table.current_snapshot()
    assert head is not None
    # main keeps everything younger than one hour, whatever expire_older_than says
    set_ref(table, "main", SnapshotRef(head.snapshot_id, max_snapshot_age_ms=3_600_000))
    result = table.new_expire_snapshots().expire_older_than(FAR_FUTURE).commit()
    assert result.snapshots_expired == 0
    set_ref(table, "main", SnapshotRef(head.snapshot_id, max_snapshot_age_ms=0))
    time.sleep(0.01)
    result = table.new_expire_snapshots().expire_older_than(0).commit()
    assert result.snapshots_expired == 3  # the head stays (min-snapshots-to-keep 1)
    assert read(table) == [(i, f"v{i}") for i in range(4)]

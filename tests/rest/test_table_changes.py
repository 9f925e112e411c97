"""How a change between two metadata versions becomes CommitTableRequest requirements and
updates (no server: the pure translation; the servers' answers are tested beside it)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stream_sink.exceptions import UnsupportedError
from stream_sink.table.catalog.rest.changes import table_changes
from stream_sink.table.metadata import TableMetadata, new_table_metadata
from stream_sink.table.partitioning import build_partition_spec
from stream_sink.table.schema import Schema
from stream_sink.table.snapshots import Snapshot, SnapshotRef
from stream_sink.table.sorting import UNSORTED_SORT_ORDER
from stream_sink.table.types import LongType, NestedField, StringType

SCHEMA = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "s", StringType()))


def base() -> TableMetadata:
    spec = build_partition_spec(SCHEMA, [])
    return new_table_metadata(SCHEMA, spec, UNSORTED_SORT_ORDER, "s3://b/t", {"a": "1"})


def snap(sid: int, parent: int | None, seq: int) -> Snapshot:
    return Snapshot(sid, parent, seq, 1000 + seq, f"s3://b/t/metadata/snap-{sid}.avro")


def kinds(items: tuple[dict[str, object], ...], key: str) -> list[object]:
    return [i[key] for i in items]


def test_an_append_adds_the_snapshot_moves_main_and_asserts_its_old_head() -> None:
    b = base()
    new = b.with_snapshot(snap(11, None, 1)).with_properties({"wm": "x"})
    changes = table_changes(b, new)
    assert changes.requirements == (
        {"type": "assert-table-uuid", "uuid": b.table_uuid},
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None},
    )
    assert kinds(changes.updates, "action") == [
        "add-snapshot",
        "set-snapshot-ref",
        "set-properties",
    ]
    assert changes.updates[1] == {
        "action": "set-snapshot-ref",
        "ref-name": "main",
        "snapshot-id": 11,
        "type": "branch",
    }
    assert changes.updates[2]["updates"] == {"wm": "x"}
    assert changes.added_snapshot_ids == (11,)


def test_a_property_change_still_asserts_the_head_of_main() -> None:
    b = base().with_snapshot(snap(11, None, 1))
    changes = table_changes(b, b.with_properties({"k": "v"}, removals=("a",)))
    assert {
        "type": "assert-ref-snapshot-id",
        "ref": "main",
        "snapshot-id": 11,
    } in changes.requirements
    assert kinds(changes.updates, "action") == ["set-properties", "remove-properties"]
    assert changes.updates[1]["removals"] == ["a"]


def test_a_branch_commit_asserts_that_branch() -> None:
    b = base().with_snapshot(snap(11, None, 1))
    new = b.with_snapshot(snap(12, 11, 2), branch="audit")
    changes = table_changes(b, new)
    asserted = {r["ref"]: r["snapshot-id"] for r in changes.requirements if "ref" in r}
    assert asserted == {"main": 11, "audit": None}
    assert changes.ref_targets == {"audit": 12}


def test_a_schema_change_adds_it_and_points_at_the_last_added() -> None:
    b = base()
    wider = Schema(*SCHEMA.fields, NestedField(3, "n", LongType()))
    changes = table_changes(b, b.with_schema(wider))
    assert kinds(changes.updates, "action") == ["add-schema", "set-current-schema"]
    assert changes.updates[1]["schema-id"] == -1
    assert {"type": "assert-current-schema-id", "current-schema-id": 0} in changes.requirements
    assert {
        "type": "assert-last-assigned-field-id",
        "last-assigned-field-id": 2,
    } in changes.requirements


def test_a_spec_change_adds_it_and_asserts_the_default_spec() -> None:
    b = base()
    changes = table_changes(b, b.with_spec(build_partition_spec(SCHEMA, [("bucket", "id", 4)])))
    assert kinds(changes.updates, "action") == ["add-spec", "set-default-spec"]
    assert {"type": "assert-default-spec-id", "default-spec-id": 0} in changes.requirements


def test_expiry_removes_snapshots() -> None:
    b = base().with_snapshot(snap(11, None, 1)).with_snapshot(snap(12, 11, 2))
    expired = replace(b, snapshots=b.snapshots[1:])
    changes = table_changes(b, expired)
    assert changes.updates == ({"action": "remove-snapshots", "snapshot-ids": [11]},)


def test_a_tag_and_its_removal() -> None:
    b = base().with_snapshot(snap(11, None, 1))
    tagged = b.with_ref("v1", SnapshotRef(11, "tag"))
    assert table_changes(b, tagged).updates == (
        {"action": "set-snapshot-ref", "ref-name": "v1", "snapshot-id": 11, "type": "tag"},
    )
    assert table_changes(tagged, b).updates == (
        {"action": "remove-snapshot-ref", "ref-name": "v1"},
    )


def test_no_change_is_no_update_and_a_removed_schema_is_refused() -> None:
    b = base()
    assert table_changes(b, b).updates == ()
    wider = b.with_schema(Schema(*SCHEMA.fields, NestedField(3, "n", LongType())))
    with pytest.raises(UnsupportedError, match="remove schemas"):
        table_changes(wider, replace(wider, schemas=wider.schemas[:1], current_schema_id=0))

"""A commit as the Iceberg REST spec makes it: the difference between the metadata a
change was computed from (``base``) and the metadata it wants (``new``), expressed as
``CommitTableRequest`` requirements and updates.

Invariants:
- Requirements make the server apply the updates only to the table the change was
  computed against: always ``assert-table-uuid``; ``assert-ref-snapshot-id`` for main and
  for every branch or tag the change moves (null when the ref did not exist), so two
  writers that built on the same head cannot both land; the schema, spec and sort-order
  assertions when the change adds or switches those.
- Every difference between ``base`` and ``new`` is either expressed as an update or is
  one the server keeps itself (last-updated-ms, the snapshot and metadata logs, the
  sequence number an added snapshot carries). Any other difference is refused
  (UnsupportedError) instead of being silently dropped.
- Updates that refer to something added in the same request use the spec's ``-1`` ("the
  last one added"), so the server's own id assignment cannot shift them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stream_sink.exceptions import UnsupportedError
from stream_sink.table.metadata import TableMetadata
from stream_sink.table.snapshots import MAIN_BRANCH, SnapshotRef

Json = dict[str, Any]


@dataclass(frozen=True)
class TableChanges:
    """The body of one ``CommitTableRequest`` (without the identifier)."""

    requirements: tuple[Json, ...]
    updates: tuple[Json, ...]

    @property
    def added_snapshot_ids(self) -> tuple[int, ...]:
        return tuple(
            int(u["snapshot"]["snapshot-id"]) for u in self.updates if u["action"] == "add-snapshot"
        )

    @property
    def ref_targets(self) -> dict[str, int]:
        """Where each moved ref must point once the commit has landed."""
        return {
            str(u["ref-name"]): int(u["snapshot-id"])
            for u in self.updates
            if u["action"] == "set-snapshot-ref"
        }

    def to_json(self) -> Json:
        return {"requirements": list(self.requirements), "updates": list(self.updates)}


def table_changes(base: TableMetadata, new: TableMetadata) -> TableChanges:
    """The requirements and updates that turn ``base`` into ``new`` on the server."""
    requirements: list[Json] = [{"type": "assert-table-uuid", "uuid": base.table_uuid}]
    updates: list[Json] = []
    if new.table_uuid != base.table_uuid:
        raise UnsupportedError("a commit cannot change a table's uuid")
    if new.format_version != base.format_version:
        updates.append({"action": "upgrade-format-version", "format-version": new.format_version})
    if new.location != base.location:
        updates.append({"action": "set-location", "location": new.location})
    _schemas(base, new, requirements, updates)
    _specs(base, new, requirements, updates)
    _sort_orders(base, new, requirements, updates)
    _snapshots(base, new, updates)
    _refs(base, new, requirements, updates)
    _properties(base, new, updates)
    return TableChanges(tuple(requirements), tuple(updates))


def _schemas(base: TableMetadata, new: TableMetadata, req: list[Json], out: list[Json]) -> None:
    known = {s.schema_id for s in base.schemas}
    added = [s for s in new.schemas if s.schema_id not in known]
    if len(new.schemas) - len(added) != len(base.schemas):
        raise UnsupportedError("a REST commit cannot remove schemas")
    if not added and new.current_schema_id == base.current_schema_id:
        return
    req.append({"type": "assert-current-schema-id", "current-schema-id": base.current_schema_id})
    req.append(
        {"type": "assert-last-assigned-field-id", "last-assigned-field-id": base.last_column_id}
    )
    for s in added:
        out.append(
            {"action": "add-schema", "schema": s.to_json(), "last-column-id": new.last_column_id}
        )
    if new.current_schema_id != base.current_schema_id:
        last_added = bool(added) and new.current_schema_id == added[-1].schema_id
        out.append(
            {
                "action": "set-current-schema",
                "schema-id": -1 if last_added else new.current_schema_id,
            }
        )


def _specs(base: TableMetadata, new: TableMetadata, req: list[Json], out: list[Json]) -> None:
    known = {s.spec_id for s in base.partition_specs}
    added = [s for s in new.partition_specs if s.spec_id not in known]
    if len(new.partition_specs) - len(added) != len(base.partition_specs):
        raise UnsupportedError("a REST commit cannot remove partition specs")
    if not added and new.default_spec_id == base.default_spec_id:
        return
    req.append({"type": "assert-default-spec-id", "default-spec-id": base.default_spec_id})
    req.append(
        {
            "type": "assert-last-assigned-partition-id",
            "last-assigned-partition-id": base.last_partition_id,
        }
    )
    for s in added:
        out.append({"action": "add-spec", "spec": s.to_json()})
    if new.default_spec_id != base.default_spec_id:
        last_added = bool(added) and new.default_spec_id == added[-1].spec_id
        out.append(
            {"action": "set-default-spec", "spec-id": -1 if last_added else new.default_spec_id}
        )


def _sort_orders(base: TableMetadata, new: TableMetadata, req: list[Json], out: list[Json]) -> None:
    known = {o.order_id for o in base.sort_orders}
    added = [o for o in new.sort_orders if o.order_id not in known]
    if not added and new.default_sort_order_id == base.default_sort_order_id:
        return
    req.append(
        {
            "type": "assert-default-sort-order-id",
            "default-sort-order-id": base.default_sort_order_id,
        }
    )
    for o in added:
        out.append({"action": "add-sort-order", "sort-order": o.to_json()})
    if new.default_sort_order_id != base.default_sort_order_id:
        last_added = bool(added) and new.default_sort_order_id == added[-1].order_id
        out.append(
            {
                "action": "set-default-sort-order",
                "sort-order-id": -1 if last_added else new.default_sort_order_id,
            }
        )


def _snapshots(base: TableMetadata, new: TableMetadata, out: list[Json]) -> None:
    before = {s.snapshot_id for s in base.snapshots}
    after = {s.snapshot_id for s in new.snapshots}
    for s in new.snapshots:
        if s.snapshot_id not in before:
            out.append({"action": "add-snapshot", "snapshot": s.to_json(new.format_version)})
    removed = sorted(before - after)
    if removed:
        out.append({"action": "remove-snapshots", "snapshot-ids": removed})


def _refs(base: TableMetadata, new: TableMetadata, req: list[Json], out: list[Json]) -> None:
    asserted = {MAIN_BRANCH} | set(base.refs) | set(new.refs)
    for name in sorted(asserted):
        old, ref = base.refs.get(name), new.refs.get(name)
        if name == MAIN_BRANCH or old != ref:
            req.append(
                {
                    "type": "assert-ref-snapshot-id",
                    "ref": name,
                    "snapshot-id": old.snapshot_id if old is not None else None,
                }
            )
        if old == ref:
            continue
        if ref is None:
            out.append({"action": "remove-snapshot-ref", "ref-name": name})
        else:
            out.append(_set_ref(name, ref))
    if new.current_snapshot_id != (
        new.refs[MAIN_BRANCH].snapshot_id if MAIN_BRANCH in new.refs else None
    ):
        raise UnsupportedError("the current snapshot must be the head of main")


def _set_ref(name: str, ref: SnapshotRef) -> Json:
    return {"action": "set-snapshot-ref", "ref-name": name, **ref.to_json()}


def _properties(base: TableMetadata, new: TableMetadata, out: list[Json]) -> None:
    changed = {k: v for k, v in new.properties.items() if base.properties.get(k) != v}
    removed = sorted(k for k in base.properties if k not in new.properties)
    if changed:
        out.append({"action": "set-properties", "updates": changed})
    if removed:
        out.append({"action": "remove-properties", "removals": removed})

"""Our REST catalog against Apache Iceberg's own REST server (the reference
implementation, JDBC catalog behind it): tables created, appended to, upserted into and
evolved through it, commits refused on stale bases, an update the server does not know
refused with its message; read back by Java Iceberg and by our reader."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import stream_sink.table.catalog.rest.catalog as rest_catalog_module
from stream_sink.catalogs import load_catalog
from stream_sink.exceptions import CommitFailedError, CommitStateUnknownError
from stream_sink.table.catalog.rest.changes import TableChanges

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])


def rows(ids: list[int], tag: str = "r") -> pa.Table:
    return pa.table({"id": ids, "name": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


@pytest.fixture
def catalog(iceberg_rest: Any, request: pytest.FixtureRequest) -> Any:
    cat = load_catalog("ref", type="rest", uri=iceberg_rest.uri)
    ns = f"ns_{request.node.name[:40].replace('[', '_').replace(']', '')}"
    cat.create_namespace(ns)
    cat.test_namespace = ns
    return cat


def test_append_upsert_evolve_then_java_reads_it(catalog: Any, java_read: Any) -> None:
    name = f"{catalog.test_namespace}.t"
    table = catalog.create_table(name, SCHEMA, identifier_fields=["id"])
    table.append(rows([1, 2, 3]))
    table.upsert(rows([2, 4], "u"))
    table.update_schema().add_column("extra", pa.int32()).commit()
    table.append(pa.table({"id": [5], "name": ["r5"], "extra": pa.array([7], pa.int32())}))
    loaded = catalog.load_table(name)
    assert len(loaded.snapshots()) == 3
    assert loaded.metadata.current_schema_id == 1
    want = [(1, "r1"), (2, "u2"), (3, "r3"), (4, "u4"), (5, "r5")]
    ours = loaded.scan().to_arrow()
    assert sorted(zip(ours["id"].to_pylist(), ours["name"].to_pylist(), strict=True)) == want
    (java,) = java_read([loaded.metadata_location])
    assert sorted(zip(java["id"].to_pylist(), java["name"].to_pylist(), strict=True)) == want


def test_stale_handles_race_and_both_land(catalog: Any) -> None:
    name = f"{catalog.test_namespace}.race"
    catalog.create_table(name, SCHEMA)
    a, b = catalog.load_table(name), catalog.load_table(name)
    a.append(rows([1]))
    b.append(rows([2]))
    assert sorted(catalog.load_table(name).scan().to_arrow()["id"].to_pylist()) == [1, 2]


def test_commit_on_a_stale_base_is_refused_by_the_ref_requirement(catalog: Any) -> None:
    t = catalog.create_table(f"{catalog.test_namespace}.stale", SCHEMA)
    stale_location, stale = t.metadata_location, t.metadata
    t.append(rows([1]))
    with pytest.raises(CommitFailedError, match="409"):
        catalog.commit(
            t.identifier, stale_location, stale.with_properties({"k": "v"}), base_metadata=stale
        )


def test_an_update_the_server_does_not_know_is_refused_with_its_message(
    catalog: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reference server answers an unknown update action with 500 (its parser
    throws), which the protocol makes an unknown outcome: the table is read back, the
    commit is not there, and the error quotes the server's message."""
    t = catalog.create_table(f"{catalog.test_namespace}.unknown", SCHEMA)
    real = rest_catalog_module.table_changes

    def with_unknown(base: Any, new: Any) -> TableChanges:
        changes = real(base, new)
        return TableChanges(changes.requirements, (*changes.updates, {"action": "frobnicate"}))

    monkeypatch.setattr(rest_catalog_module, "table_changes", with_unknown)
    with pytest.raises(CommitStateUnknownError, match="Cannot convert metadata update action"):
        catalog.commit(
            t.identifier,
            t.metadata_location,
            t.metadata.with_properties({"k": "v"}),
            base_metadata=t.metadata,
        )
    assert "k" not in catalog.load_table(t.identifier).properties

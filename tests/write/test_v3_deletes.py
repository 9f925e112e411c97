"""Delta writers on a v3 table write deletion vectors, never position delete files;
every key not written earlier in the task gets an equality delete, in a first batch
too. Adding a vector for a data file that has one merges (old removed in the same
commit); a concurrent vector for the same data file fails the commit. Every reader at
hand reads the same rows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from readers import duckdb_rows

from stream_sink.exceptions import (
    ConcurrentDeleteReadError,
    ConcurrentDeletionVectorError,
    ValidationError,
)
from stream_sink.table.catalog import Catalog
from stream_sink.table.deletion_vectors import (
    VectorFor,
    read_deletion_vector,
    write_deletion_vectors,
)
from stream_sink.table.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    read_manifest,
    snapshot_manifests,
)
from stream_sink.tables import IcebergTable

ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def data(*rows: tuple[int, str]) -> pa.Table:
    return pa.table({"id": [r[0] for r in rows], "v": [r[1] for r in rows]}, ARROW)


def live(t: IcebergTable, content: ManifestContent) -> list[DataFile]:
    out = []
    for m in snapshot_manifests(t.io, t.refresh().current_snapshot()):
        if m.content == content:
            out += [e.data_file for e in read_manifest(t.io, m) if e.is_live]
    return out


def ours(t: IcebergTable) -> list[tuple[int, str]]:
    got = t.refresh().scan().to_arrow().to_pylist()
    return sorted((r["id"], r["v"]) for r in got)


def py_rows(location: str) -> list[dict[str, Any]]:
    from pyiceberg.table import StaticTable

    return StaticTable.from_metadata(location).scan().to_arrow().to_pylist()  # type: ignore[no-any-return]


def test_upserts_on_a_v3_table_write_deletion_vectors(hadoop_catalog: Catalog) -> None:
    t = hadoop_catalog.create_table("db.t", ARROW, identifier_fields=["id"], format_version=3)
    t.append(data((1, "a"), (2, "b")))
    # key 3 twice in one call: the first row is deleted by position -> a vector;
    # key 2 of the earlier batch: an equality delete
    t.upsert(data((2, "B"), (3, "c"), (3, "C")))
    deletes = live(t, ManifestContent.DELETES)
    kinds = sorted((d.content.name, d.file_format.value) for d in deletes)
    assert kinds == [("EQUALITY_DELETES", "PARQUET"), ("POSITION_DELETES", "PUFFIN")]
    dv = next(d for d in deletes if d.is_deletion_vector)
    assert read_deletion_vector(t.io, dv).tolist() == [1]  # (3, "c") was row 1 of its file
    expected = [(1, "a"), (2, "B"), (3, "C")]
    assert ours(t) == expected
    assert sorted((r["id"], r["v"]) for r in duckdb_rows(t.metadata_location)) == expected
    snap = t.current_snapshot()
    assert snap.first_row_id == 2 and t.metadata.next_row_id == 2 + snap.added_rows


def test_the_first_upsert_into_an_empty_table_writes_an_equality_delete_per_key(
    hadoop_catalog: Catalog,
) -> None:
    """The writer does not read the table: every key of an upsert batch gets an equality
    delete at its first row in the task, in the first batch into an empty table too (one
    file per partition written). A key repeated in the batch is deleted by a vector.
    pyiceberg reads no equality deletes, so not even this snapshot, until converted."""
    t = hadoop_catalog.create_table(
        "db.first",
        ARROW,
        identifier_fields=["id"],
        partition_spec=[("bucket", "id", 8)],
        format_version=3,
    )
    t.upsert(data(*[(i, "a") for i in range(100)], (5, "b")))
    deletes = live(t, ManifestContent.DELETES)
    equality = [d for d in deletes if d.content == DataFileContent.EQUALITY_DELETES]
    assert len(equality) == 8 and sum(d.record_count for d in equality) == 100
    [dv] = [d for d in deletes if d.is_deletion_vector]
    assert dv.record_count == 1
    expected = sorted([(i, "a") for i in range(100) if i != 5] + [(5, "b")])
    assert ours(t) == expected
    with pytest.raises((ValueError, NotImplementedError), match="equality deletes"):
        py_rows(t.metadata_location)
    t.maintenance.convert_equality_deletes()
    assert sorted((r["id"], r["v"]) for r in py_rows(t.refresh().metadata_location)) == expected


def test_a_vector_for_a_file_with_one_merges_and_a_concurrent_one_conflicts(
    hadoop_catalog: Catalog,
) -> None:
    t = hadoop_catalog.create_table("db.t", ARROW, format_version=3)
    t.append(data(*[(i, f"v{i}") for i in range(6)]))
    (f,) = live(t, ManifestContent.DATA)

    def vector(name: str, positions: list[int]) -> DataFile:
        (dv,) = write_deletion_vectors(
            t.io,
            f"{t.location}/data/{name}.puffin",
            [VectorFor(f.file_path, f.spec_id, f.partition, np.array(positions))],
        )
        return dv

    first = vector("a", [0])
    start = t.current_snapshot().snapshot_id
    t.new_row_delta().add_deletes(first).commit()
    assert ours(t) == [(i, f"v{i}") for i in range(1, 6)]
    # a second vector without removing the first: two vectors for one file are refused
    with pytest.raises(ConcurrentDeletionVectorError, match=f.file_path):
        t.new_row_delta().add_deletes(vector("b", [1])).commit()
    # merged (old positions plus new) and the old removed in the same commit
    merged = vector("c", [0, 1])
    t.new_row_delta().add_deletes(merged).remove_deletes(first).commit()
    (only,) = live(t, ManifestContent.DELETES)
    assert only.file_path == merged.file_path
    assert ours(t) == [(i, f"v{i}") for i in range(2, 6)]
    # a writer that read the table before the first vector, merging nothing, loses
    late = t.new_row_delta().add_deletes(vector("d", [5]))
    late.validate_data_files_exist([f.file_path], start)
    with pytest.raises(ConcurrentDeletionVectorError):
        late.commit()
    assert ours(t) == [(i, f"v{i}") for i in range(2, 6)]
    assert sorted((r["id"], r["v"]) for r in py_rows(t.metadata_location)) == ours(t)


def test_position_delete_files_are_refused_on_v3_and_vectors_on_v2(hadoop_catalog: Catalog) -> None:
    v2 = hadoop_catalog.create_table("db.v2", ARROW)
    v2.append(data((1, "a")))
    (f,) = live(v2, ManifestContent.DATA)
    (dv,) = write_deletion_vectors(
        v2.io, f"{v2.location}/data/x.puffin", [VectorFor(f.file_path, 0, (), np.array([0]))]
    )
    with pytest.raises(ValidationError, match="needs a format version 3 table"):
        v2.new_row_delta().add_deletes(dv).commit()
    v2.upgrade_format_version(3)
    pos = DataFile(
        DataFileContent.POSITION_DELETES, f"{v2.location}/data/p.parquet", FileFormat.PARQUET,
        0, (), 1, 10,
    )  # fmt: skip
    with pytest.raises(ValidationError, match="position delete files are not allowed"):
        v2.new_row_delta().add_deletes(pos).commit()
    v2.new_row_delta().add_deletes(dv).commit()  # now v3: the vector is fine
    assert ours(v2) == []


def test_a_vector_for_a_data_file_not_in_the_table_is_refused(hadoop_catalog: Catalog) -> None:
    t = hadoop_catalog.create_table("db.t", ARROW, format_version=3)
    t.append(data((1, "a")))
    (dv,) = write_deletion_vectors(
        t.io,
        f"{t.location}/data/x.puffin",
        [VectorFor(f"{t.location}/data/nope.parquet", 0, (), np.array([0]))],
    )
    before = t.current_snapshot()
    with pytest.raises(ConcurrentDeleteReadError, match=r"nope\.parquet"):
        t.new_row_delta().add_deletes(dv).commit()
    assert t.refresh().current_snapshot() == before and ours(t) == [(1, "a")]

"""stream_sink.commit.iceberg.position_deletes: ``deletes="positions"`` through the commit
protocol, without Spark. Changelog streams (updates, deletes, key re-inserts, truncates)
written by the real CDC writers commit deletion vectors (v3) or position delete files
(v2) and no equality delete file in any snapshot; every snapshot is read exactly by
pyiceberg, DuckDB and ours; the key index is built once and kept between commits; a
foreign commit between the lookup and the commit makes the batch resolve again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from changelog import CHANGELOGS, TRUNCATE, expected_rows, write_changes
from harness import SCHEMA, Harness, live_files, table_rows, upsert_result, write_rows
from readers import pyiceberg_rows

from stream_sink.catalogs import load_catalog
from stream_sink.commit.iceberg.position_deletes import PositionResolver
from stream_sink.commit.iceberg.target import IcebergTarget
from stream_sink.exceptions import InvalidOptionError
from stream_sink.read.scan import TableScan
from stream_sink.spark.options import parse_options
from stream_sink.table.catalog import Catalog
from stream_sink.table.manifest import DataFileContent, read_manifest, read_manifest_list
from stream_sink.table.table import Table


@pytest.fixture(params=[2, 3], ids=["v2", "v3"])
def versioned(request: pytest.FixtureRequest, warehouse: Catalog) -> Table:
    return warehouse.create_table(
        "db.p",
        schema=SCHEMA,
        identifier_fields=["id"],
        format_version=request.param,
        properties={"commit.retry.min-wait-ms": "1"},
    )


def _open(tmp_path: Path, table: Table, deletes: str = "positions", **kw: Any) -> Harness:
    h = Harness(tmp_path, table, "memory", job_id="job-1", deletes=deletes, **kw)
    h.open()
    return h


def _resolver(h: Harness) -> PositionResolver:
    target = h.c.target
    assert isinstance(target, IcebergTarget) and target.positions is not None
    return target.positions


def _equality_files_in_any_snapshot(table: Table) -> set[str]:
    """Paths of the equality delete files in any manifest of any snapshot."""
    meta = table.refresh().metadata
    paths = set()
    for snap in meta.snapshots:
        for m in read_manifest_list(table.io, snap.manifest_list):
            ptype = meta.spec_by_id(m.partition_spec_id).partition_type(meta.schema)
            for e in read_manifest(table.io, m, ptype):
                if e.data_file.content == DataFileContent.EQUALITY_DELETES:
                    paths.add(e.data_file.file_path)
    return paths


def _our_rows(table: Table) -> list[tuple[int, str]]:
    rows = TableScan(table.refresh()).to_arrow()
    return sorted(zip(rows["id"].to_pylist(), rows["data"].to_pylist(), strict=True))


def _pyiceberg(table: Table) -> list[tuple[int, str]]:
    return sorted((r["id"], r["data"]) for r in pyiceberg_rows(table.refresh().metadata_location))


@pytest.mark.parametrize("name", sorted(CHANGELOGS))
def test_a_changelog_commits_positions_that_every_reader_reads(
    tmp_path: Path, versioned: Table, name: str
) -> None:
    batches = CHANGELOGS[name]
    h = _open(tmp_path, versioned)
    for i, batch in enumerate(batches):
        h.step(i, write_changes(versioned, batch))
        want = expected_rows(batches[: i + 1])
        assert _our_rows(versioned) == want, f"batch {i}"
        assert _pyiceberg(versioned) == want, f"batch {i}"
        assert table_rows(versioned) == want, f"batch {i}"
    assert not _equality_files_in_any_snapshot(versioned)
    deletes = [f for f in live_files(versioned) if f.content == DataFileContent.POSITION_DELETES]
    assert deletes, "updates of earlier batches became position deletes"
    if versioned.format_version >= 3:
        assert all(f.is_deletion_vector for f in deletes)
        targets = [f.referenced_data_file for f in deletes]
        assert len(targets) == len(set(targets)), "one vector per data file"
    else:
        assert not any(f.is_deletion_vector for f in deletes)
    truncates = sum(1 for b in batches for c in b if c[0] == TRUNCATE)
    assert _resolver(h).builds <= 1 + truncates, "the index is kept between commits"
    h.close()


def test_the_index_is_rebuilt_after_a_restart_and_stays_exact(
    tmp_path: Path, versioned: Table
) -> None:
    batches = CHANGELOGS["plain"]
    h = _open(tmp_path, versioned)
    for i, batch in enumerate(batches[:3]):
        h.step(i, write_changes(versioned, batch))
    h.crash()
    h = _open(tmp_path, versioned)
    for i, batch in enumerate(batches[3:], start=3):
        h.step(i, write_changes(versioned, batch))
    assert _pyiceberg(versioned) == expected_rows(batches)
    assert not _equality_files_in_any_snapshot(versioned)
    h.close()


@pytest.mark.parametrize("granularity", ["file", "partition"])
def test_v2_deletes_from_two_files_write_a_file_per_data_file_by_default(
    tmp_path: Path, warehouse: Catalog, granularity: str
) -> None:
    """Java's ``write.delete.granularity``: ``file`` (default) names each data file in a
    delete file of its own, ``partition`` puts them in one."""
    props = {} if granularity == "file" else {"write.delete.granularity": "partition"}
    table = warehouse.create_table(
        "db.g", schema=SCHEMA, identifier_fields=["id"], format_version=2, properties=props
    )
    h = _open(tmp_path, table)
    h.step(0, write_changes(table, [("+I", 1, "a"), ("+I", 2, "b")]))
    h.step(1, write_changes(table, [("+I", 3, "c")]))
    h.step(2, write_changes(table, [("-U", 1, "a"), ("+U", 1, "a1"), ("-D", 3, "c")]))
    want = [(1, "a1"), (2, "b")]
    assert _our_rows(table) == want and _pyiceberg(table) == want and table_rows(table) == want
    added = [f for f in live_files(table) if f.content == DataFileContent.POSITION_DELETES]
    targets = sorted(str(f.referenced_data_file) for f in added)
    if granularity == "file":
        assert len(added) == 2 and len(set(targets)) == 2 and "None" not in targets
    else:
        assert len(added) == 1 and targets == ["None"]
    h.close()


def test_a_key_an_older_equality_delete_deleted_is_not_live(
    tmp_path: Path, versioned: Table
) -> None:
    """A table whose earlier batches committed equality deletes: a positions batch
    deletes only rows that are still live, and adds no equality delete."""
    eq = _open(tmp_path, versioned, deletes="equality", operator_id="old")
    eq.step(0, upsert_result(versioned, [(1, "a"), (2, "b"), (3, "c")]))
    eq.step(1, upsert_result(versioned, [(1, "a1")], deleted=[2]))  # 2 gone by equality
    eq.close()
    before = _equality_files_in_any_snapshot(versioned)
    h = _open(tmp_path, versioned)
    h.step(0, write_changes(versioned, [("+I", 2, "b2"), ("-U", 1, "a1"), ("+U", 1, "a2")]))
    assert _our_rows(versioned) == [(1, "a2"), (2, "b2"), (3, "c")]
    assert table_rows(versioned) == [(1, "a2"), (2, "b2"), (3, "c")]
    assert before and _equality_files_in_any_snapshot(versioned) == before
    h.close()


def test_a_foreign_commit_between_lookup_and_commit_resolves_again(
    tmp_path: Path, versioned: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer rewrites the file holding key 1 (a compaction: same rows, new
    file) after the batch resolved key 1's position: the commit is refused, the key is
    resolved again in the new file, and no row comes back or is lost."""
    h = _open(tmp_path, versioned)
    h.step(0, write_changes(versioned, [("+I", 1, "a"), ("+I", 2, "b")]))
    resolver = _resolver(h)
    real = resolver.resolve
    calls: list[int] = []

    def racing(table: Table, head: Any, result: Any) -> Any:
        out = real(table, head, result)
        if not calls:
            _compact(table)
        calls.append(1)
        return out

    monkeypatch.setattr(resolver, "resolve", racing)
    h.step(1, write_changes(versioned, [("-U", 1, "a"), ("+U", 1, "a1"), ("-D", 2, "b")]))
    assert len(calls) == 2, "resolved again after the foreign commit"
    assert _pyiceberg(versioned) == [(1, "a1")]
    assert table_rows(versioned) == [(1, "a1")]
    h.close()


def _compact(table: Table) -> None:
    """Every live row of the table rewritten into one new data file (another writer)."""
    fresh = table.catalog.load_table(table.identifier)
    rows = TableScan(fresh).to_arrow()
    old = live_files(fresh)
    pairs = zip(rows["id"].to_pylist(), rows["data"].to_pylist(), strict=True)
    new = write_rows(fresh, list(pairs))
    op = fresh.new_rewrite()
    op.rewrite_files(
        [f for f in old if f.content == DataFileContent.DATA],
        new.data_files,
        deletes_to_remove=[f for f in old if f.content != DataFileContent.DATA],
    )
    op.commit()


def test_positions_need_a_cdc_mode_and_a_known_value(tmp_path: Path) -> None:
    kw: dict[str, Any] = {"table": "db.t", "checkpoint_location": str(tmp_path)}
    with pytest.raises(InvalidOptionError, match="needs mode='upsert' or 'changelog'"):
        parse_options(**kw, deletes="positions")
    with pytest.raises(InvalidOptionError, match="deletes='vectors' is not one of"):
        parse_options(**kw, mode="upsert", order_by="lsn", deletes="vectors")
    opts = parse_options(**kw, mode="upsert", order_by="lsn", deletes="Positions")
    assert opts.deletes == "positions"
    assert parse_options(**kw).deletes == "equality"
    assert parse_options(**opts.as_kwargs()).deletes == "positions"


def test_positions_refuse_a_v1_table(tmp_path: Path) -> None:
    catalog = load_catalog("t", type="hadoop", warehouse=str(tmp_path / "w"))
    catalog.create_namespace("db")
    v1 = catalog.create_table("db.v1", schema=SCHEMA, format_version=1)
    with pytest.raises(InvalidOptionError, match="needs a v2 or v3 table"):
        IcebergTarget(v1, deletes="positions")
    assert IcebergTarget(v1).positions is None

"""Staging manifests' names: only characters every object store and table bucket takes,
the same for the same operator and distinct for distinct ones; and state that staged
manifests under names holding ``=`` (a routed sink's ``<sink id>=<table>``) still
restores, commits them and sweeps their leftovers."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from harness import Harness, staging_manifests, table_rows, upsert_result

from stream_sink.commit.iceberg.staging import ManifestNamer, name_part
from stream_sink.maintenance.orphans import STAGING_MANIFEST

SAFE = re.compile(r"^[A-Za-z0-9._-]+$")
"""Letters, digits, ``-``, ``_``, ``.``: safe in S3's key guidelines, and what SeaweedFS's
table buckets take in a table's metadata directory."""
ROUTED = "routed-_table=db.t"


def _old_name(self: ManifestNamer, checkpoint_id: int, batch_id: int, n: int) -> str:
    """A staging manifest's name with the operator id itself in it (what earlier
    releases wrote, ``=`` included)."""
    return f"{self.job_id}-{self.operator_id}-{checkpoint_id}-{batch_id}-{self.token}-{n:05d}.avro"


def test_staging_manifest_names_hold_only_safe_characters_and_tell_operators_apart() -> None:
    ids = ["db.t", "sink_1", ROUTED, "routed-_table-db.t", "a=b", "a-b", "a=b=c", "a=b-c"]
    names = {op: ManifestNamer("0f1e2d3c-job", op, "0123abcd").name(3, 2, 1) for op in ids}
    for op, name in names.items():
        assert SAFE.match(name), (op, name)
        assert STAGING_MANIFEST.match(name), name  # orphan cleanup keeps it
        assert ManifestNamer("other-job", op, "0123abcd").sweep_pattern().match(name)
        assert not ManifestNamer("other-job", op, "89abcdef").sweep_pattern().match(name)
    assert len(set(names.values())) == len(ids)
    assert names["db.t"] == "0f1e2d3c-job-db.t-3-2-0123abcd-00001.avro"  # safe ids unchanged
    assert name_part(ROUTED) == name_part(ROUTED)
    assert re.fullmatch(r"routed-_table-db\.t-[0-9a-f]{8}", name_part(ROUTED))
    # the same operator's manifests staged under the operator id itself are its own too
    old = _old_name(ManifestNamer("j", ROUTED, "0123abcd"), 3, 2, 1)
    assert ManifestNamer("j", ROUTED, "0123abcd").sweep_pattern().match(old)
    assert not ManifestNamer("j", "a=b", "0123abcd").sweep_pattern().match(old)


@pytest.mark.parametrize("state", ["kept", "lost"])
def test_state_that_staged_manifests_named_with_equals_signs_restores_and_commits_them(
    harness: Callable[..., Harness], monkeypatch: pytest.MonkeyPatch, state: str
) -> None:
    """A routed table's state staged under the old names, then the process died: the
    restart commits the staged checkpoint from the names the state holds (or the
    checkpoint holds, when the state is lost), sweeps an unreferenced manifest of the
    old name (a crash between staging and the state write left it), and stages every
    later batch under safe names."""
    monkeypatch.setattr(ManifestNamer, "name", _old_name)
    h = harness(operator_id=ROUTED)
    h.step(0, upsert_result(h.table, [(1, "a"), (2, "b")]))
    h.process(1, upsert_result(h.table, [(2, "c"), (3, "d")]))
    h.checkpoint(1)
    staged = staging_manifests(h.table)
    assert staged and all("=" in n for n in staged)
    token = staged[0].rsplit("-", 2)[-2]
    metadata = Path(h.table.metadata_dir)
    leftover = metadata / _old_name(ManifestNamer("job-1", ROUTED, token), 2, 2, 1)
    shutil.copy(metadata / staged[0], leftover)
    h.crash()
    monkeypatch.undo()
    if state == "lost":
        shutil.rmtree(h.state_dir)
    h.open()
    assert table_rows(h.table) == [(1, "a"), (2, "c"), (3, "d")]
    assert h.watermark() == 1
    assert leftover.exists() == (state == "lost")  # a new token after a restore
    leftover.unlink(missing_ok=True)
    assert staging_manifests(h.table) == []
    h.process(2, upsert_result(h.table, [(4, "e")], deleted=[1]))
    h.checkpoint(2)
    fresh = staging_manifests(h.table)
    assert fresh and all(SAFE.match(n) for n in fresh), fresh
    h.notify(2)
    assert table_rows(h.table) == [(2, "c"), (3, "d"), (4, "e")]
    assert staging_manifests(h.table) == []

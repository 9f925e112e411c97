"""``stream-sink rewind``: Spark's logs edited so that its next start runs a batch again,
in an order Spark restarts from safely when interrupted; refused when the batch's input
is not logged.

Tests stream_sink.cli.rewind: ``stream-sink rewind``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stream_sink.cli.main import main
from stream_sink.exceptions import CheckpointError
from stream_sink.io.fileio import FileIO
from stream_sink.ops.rewind import plan_rewind, rewind
from stream_sink.spark import query


def spark_checkpoint(root: Path, planned: int, committed: int) -> Path:
    """A Spark checkpoint whose offset log holds batches 0..planned-1 and whose commit
    log 0..committed-1 (each with its local checksum file)."""
    root.mkdir(parents=True)
    (root / "metadata").write_text('{"id":"q"}\n')
    for log_dir, count in (("offsets", planned), ("commits", committed)):
        (root / log_dir).mkdir(parents=True)
        for b in range(count):
            body = ["v1", json.dumps({"batchWatermarkMs": 0}), json.dumps({"t": {"0": b}})]
            (root / log_dir / str(b)).write_text("\n".join(body))
            (root / log_dir / f".{b}.crc").write_text("crc")
    return root


def test_rewind_leaves_the_batch_newest_in_the_offset_log_and_absent_from_the_commits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loc = spark_checkpoint(tmp_path / "spark", planned=6, committed=5)
    io = FileIO.for_location(str(loc), {})
    plan = plan_rewind(str(loc), 2, io)
    assert plan.offsets == (5, 4, 3) and plan.commits == (4, 3, 2)  # offsets first
    files = plan.files()
    assert files.index(f"{loc}/offsets/3") < files.index(f"{loc}/commits/4")
    assert main(["rewind", "--spark-checkpoint-location", str(loc), "--batch", "2"]) == 0
    out = capsys.readouterr().out
    assert f"removed {loc}/commits/2" in out and f"removed {loc}/offsets/.5.crc" in out
    assert "next start runs batch 2 again" in out
    assert query.planned_batch_ids(str(loc), io) == [0, 1, 2]
    assert query.acknowledged_batch_ids(str(loc), io) == [0, 1]
    assert sorted(p.name for p in (loc / "commits").iterdir()) == [".0.crc", ".1.crc", "0", "1"]
    rewind(plan, io)  # again: nothing left to remove, nothing fails


def test_dry_run_removes_nothing_and_an_unlogged_batch_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loc = spark_checkpoint(tmp_path / "spark", planned=3, committed=3)
    args = ["rewind", "--spark-checkpoint-location", str(loc), "--batch", "1", "--dry-run"]
    assert main(args) == 0
    assert f"would remove {loc}/commits/1" in capsys.readouterr().out
    assert len(list((loc / "commits").iterdir())) == 6
    with pytest.raises(CheckpointError, match=r"no batch 7 \(batches logged: 0 to 2\)"):
        plan_rewind(str(loc), 7, FileIO.for_location(str(loc), {}))
    assert main(["rewind", "--spark-checkpoint-location", str(loc), "--batch", "7"]) == 1
    assert "CheckpointError" in capsys.readouterr().err


def test_a_batch_reads_input_unless_its_offsets_equal_the_previous_ones(tmp_path: Path) -> None:
    loc = spark_checkpoint(tmp_path / "spark", planned=3, committed=3)
    io = FileIO.for_location(str(loc), {})
    same = (loc / "offsets" / "1").read_text().replace('"0": 1', '"0": 0')
    (loc / "offsets" / "1").write_text(same.replace('Ms": 0', 'Ms": 9'))
    assert not query.batch_read_input(str(loc), 1, io)  # a no-data batch: the watermark moved
    assert query.batch_read_input(str(loc), 2, io)
    assert query.batch_read_input(str(loc), 0, io)  # the first batch: nothing to compare
    assert query.batch_read_input(str(loc), 9, io)  # not logged: assumed to have read input

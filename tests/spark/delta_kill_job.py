"""A streaming job for the Delta kill tests: an append stream, then an upsert stream.

``python delta_kill_job.py ROOT`` reads ROOT/append-in and ROOT/upsert-in (JSON files,
one per micro-batch) into Delta tables ROOT/lake/events and ROOT/lake/latest, with
checkpoints under ROOT/dchk-* and state under ROOT/dstate. It prints ``batch <sink> <id>``
as each micro-batch starts, so the test knows Spark is running before it kills it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kill_job import run

from stream_sink.spark import DeltaSink, local_session


def main(root: Path) -> None:
    spark = local_session("stream-sink-delta-kill-test")
    state = str(root / "dstate")
    append = DeltaSink(
        path=str(root / "lake" / "events"),
        partition_by=["p"],
        checkpoint_location=str(root / "dchk-append"),
        state_dir=state,
    )
    run(spark, append, root / "append-in", "id long, data string, p string")
    upsert = DeltaSink(
        path=str(root / "lake" / "latest"),
        mode="upsert",
        equality_fields=["id"],
        order_by="seq",
        checkpoint_location=str(root / "dchk-upsert"),
        state_dir=state,
    )
    run(spark, upsert, root / "upsert-in", "id long, data string, seq long")
    print("done", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))

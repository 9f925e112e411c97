"""The drill's driver process: runs a plan of job steps in order, reporting each to a
status file, until it ends or is killed.

``python -m stream_sink.ops.drill.child PLAN_FILE STATUS_FILE``. PLAN_FILE is JSON:
``{"job": "module:function", "steps": [{"step": 0, "context": {...}, "failpoint":
"after-table-commit@1" | null}, ...]}``. For each step the process appends
``start <step>`` to STATUS_FILE, sets ``STREAM_SINK_FAILPOINT`` to the step's failpoint
(or clears it) and re-reads it, calls ``job(**context)``, then appends ``done <step>``.
Each micro-batch an ``IcebergSink`` or ``DeltaSink`` starts in this process appends
``batch <step> <batch id>`` (random kills count their delay from the first one: a kill
during Spark's start-up tests little), and each fault point acted out in it (a fault
scenario's run is not killed: it must recover in the same run) ``fault <step> <name>``.
Several steps share one process (and one JVM), so a drill pays Spark's start-up once per
kill, not once per run. Exit status 0 when every step is done; an exception in the job
ends the process with status 1 after printing it.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

from stream_sink.commit.failpoints import ENV_VAR, on_fault, reset_failpoints
from stream_sink.ops.drill.jobs import resolve

JOB_FAILED = 1


def run_plan(plan: dict[str, Any], status_path: str) -> None:
    job = resolve(plan["job"], "--job")
    current = [-1]
    _report_batches(status_path, current)
    on_fault(lambda name: _status(status_path, f"fault {current[0]} {name}"))
    for step in plan["steps"]:
        current[0] = step["step"]
        _status(status_path, f"start {step['step']}")
        if step.get("failpoint"):
            os.environ[ENV_VAR] = step["failpoint"]
        else:
            os.environ.pop(ENV_VAR, None)
        reset_failpoints()
        job(**step["context"])
        _status(status_path, f"done {step['step']}")


def _report_batches(status_path: str, current: list[int]) -> None:
    """Make every IcebergSink and DeltaSink of this process report the micro-batches it
    starts."""
    from stream_sink.spark.foreach_batch.delta import DeltaSink
    from stream_sink.spark.foreach_batch.iceberg import IcebergSink

    for cls in (IcebergSink, DeltaSink):
        cls.foreach_batch = _reporting(cls.foreach_batch, status_path, current)  # type: ignore[method-assign]


def _reporting(original: Any, status_path: str, current: list[int]) -> Any:
    def foreach_batch(self: Any, df: Any, batch_id: int) -> None:
        _status(status_path, f"batch {current[0]} {batch_id}")
        original(self, df, batch_id)

    return foreach_batch


def _status(path: str, line: str) -> None:
    with open(path, "a") as f:
        f.write(line + "\n")
        f.flush()


def main(argv: list[str]) -> int:
    with open(argv[0]) as f:
        plan = json.load(f)
    try:
        run_plan(plan, argv[1])
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(JOB_FAILED)  # a failed query may leave non-daemon threads behind
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

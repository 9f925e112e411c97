"""What the TRUNCATE check costs a batch without a truncate: Debezium events parsed by
``from_debezium`` and written to Spark's ``noop`` sink, with the sinks' truncate filter
(``stream_sink.spark.cdc.truncation.flagged``, what every CDC batch with a row kind
column goes through) against without it, in the same run.

Run: ``python bench/bench_truncate_check.py [events]`` (default 200,000). Prints the best
of 5 alternating runs of each, the ratio flagged / plain, and the driver's peak memory.
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from pathlib import Path

from stream_sink.spark import ROW_KIND_COLUMN, from_debezium, local_session
from stream_sink.spark.cdc import truncation

ROWS = "id long, name string, city string, n long"


def _events(path: Path, count: int) -> None:
    with open(path, "w") as f:
        for i in range(count):
            after = {"id": i % 50_000, "name": f"n{i}", "city": "Paris", "n": i}
            op = "c" if i < 50_000 else "u"
            event = {"op": op, "before": None, "after": after, "source": {"lsn": i}}
            f.write(json.dumps(event) + "\n")


def main(count: int) -> None:
    spark = local_session("bench-truncate-check")
    with tempfile.TemporaryDirectory() as root:
        path = Path(root) / "events.json"
        _events(path, count)
        changes = from_debezium(spark.read.text(str(path)), row_schema=ROWS)
        runs = {
            "plain": lambda: changes.write.format("noop").mode("overwrite").save(),
            "flagged": lambda: (
                truncation.flagged(changes, ROW_KIND_COLUMN)
                .write.format("noop")
                .mode("overwrite")
                .save()
            ),
        }
        runs["plain"]()  # warm up: JIT, file cache
        best = dict.fromkeys(runs, float("inf"))
        for _ in range(5):
            for name, run in runs.items():
                started = time.perf_counter()
                run()
                best[name] = min(best[name], time.perf_counter() - started)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"events {count}: plain {best['plain']:.2f} s, flagged {best['flagged']:.2f} s, "
          f"ratio flagged/plain {best['flagged'] / best['plain']:.3f}; "
          f"driver peak {peak_mb:.0f} MB")  # fmt: skip


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)

"""Upsert and append: IcebergSink on Spark vs Flink's own IcebergSink, on the same input.

Run: ``.venv/bin/python bench/bench_flink_peer.py [--files 8] [--rows 50000] [--rounds 3]``
(Flink runs through ``tests/peers/peer flink``: pyflink 2.1 with Apache Iceberg's Flink
runtime, installed on first use; see ``tests/peers/flink.py``).

Input: ``files`` JSON-lines files of ``rows`` changes each, written once and read by both:

- upsert: Debezium change events (``op``, ``before``, ``after``, ``source.lsn``); file
  ``f`` touches only its own ``rows / 2`` keys (a create for each new key, then 80%
  updates with their before image and 20% deletes), so the final table does not depend on
  the order in which two readers take the files. Flink: ``debezium-json`` source,
  ``INSERT … /*+ OPTIONS('upsert-enabled'='true') */`` into a table with a primary key.
  Ours: ``spark.readStream.text`` → ``from_debezium`` → ``IcebergSink(mode="upsert")``.
- append: plain JSON rows. Flink: ``json`` source into a table without a key; ours:
  ``spark.readStream.json`` → ``IcebergSink`` (append).

Both at parallelism 2 (Flink's ``parallelism.default``, Spark's ``local[2]``), both
unpartitioned, zstd, format version 2, on this machine, each side's JVM started once and
warmed up with one untimed run over the first file, then ``--rounds`` timed
rounds of every mode and setting (the medians are compared; a side's first full run
carries one-time costs the warm-up over one file does not take). Two settings per mode:

- defaults: Flink without checkpointing (its IcebergSink commits once, at the end of the
  bounded input); ours with ``availableNow`` and no ``maxFilesPerTrigger`` (one
  micro-batch, one commit).
- equal commits: ours with one file per micro-batch (``files`` commits); Flink with a
  checkpoint interval of its defaults run's time divided by ``files``, so that it commits
  about as often (the commit counts are printed: Flink's checkpoints are timed, ours
  follow the input).

Time: Flink's from job submission to the job's end (the JVM and catalog start excluded),
ours from the query's start to its end (the session start excluded). Rows/s are input
changes per second. Every final table is read by our reader; the two sides' tables of a
mode and setting must hold the same rows. Prints the load average at start and end and
the peak resident memory of each side's JVM (Flink: one JVM for everything; ours: the
Spark JVM, plus the driver's Python).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from streams import drain_into, jvm_peak_mib

import stream_sink as ss
from stream_sink.spark import ORDER_COLUMN, ROW_KIND_COLUMN, IcebergSink, from_debezium
from stream_sink.spark.session import local_session

REPO = Path(__file__).resolve().parent.parent
PEER = REPO / "tests" / "peers" / "peer"
FLINK_COLUMNS = "id BIGINT, name STRING, amount DOUBLE, qty INT"
ROW_SCHEMA = "id long, name string, amount double, qty int"
ARROW_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("amount", pa.float64()),
        pa.field("qty", pa.int32()),
    ]
)
MODES = ("upsert", "append")


def write_inputs(root: Path, files: int, rows: int) -> None:
    """``root/upsert`` and ``root/append``: ``files`` files each, increasing mtimes."""
    rng = random.Random(24)
    keys = max(1, rows // 2)
    base = time.time() - 10_000
    lsn = 0
    for f in range(files):
        live: dict[int, dict[str, Any]] = {}
        events, plain = [], []
        for i in range(rows):
            lsn += 1
            key = f * keys + (i if i < keys else rng.randrange(keys))
            row = {"id": key, "name": f"n{lsn}", "amount": lsn / 8, "qty": i % 97}
            old = live.get(key)
            if old is None:
                op, before, after = "c", None, row
            elif rng.random() < 0.2:
                op, before, after = "d", old, None
            else:
                op, before, after = "u", old, row
            if after is None:
                del live[key]
            else:
                live[key] = after
            events.append({"op": op, "before": before, "after": after, "source": {"lsn": lsn}})
            plain.append({"id": f * rows + i, "name": f"n{i}", "amount": i / 8, "qty": i % 97})
        for mode, lines in (("upsert", events), ("append", plain)):
            (root / mode).mkdir(parents=True, exist_ok=True)
            path = root / mode / f"batch-{f:05d}.json"
            path.write_text("".join(json.dumps(e) + "\n" for e in lines))
            os.utime(path, (base + f, base + f))


def flink_job(root: Path, name: str, mode: str, files: list[Path], checkpoint_ms: int) -> dict:
    return {
        "warehouse": str(root / "flink-warehouse"),
        "parallelism": 2,
        "checkpoint_ms": checkpoint_ms,
        "aligned": False,
        "pipelines": [
            {
                "table": f"db.{name}",
                "columns": FLINK_COLUMNS,
                "key": ["id"] if mode == "upsert" else None,
                "format": "debezium-json" if mode == "upsert" else "json",
                "upsert": mode == "upsert",
                "source": str(root / "flink-sources" / name),
                "files": [str(p) for p in files],
            }
        ],
    }


def run_flink(root: Path, jobs: list[dict]) -> list[dict]:
    """The jobs one after another on one Flink JVM; their answers."""
    spec = root / f"flink-{time.monotonic_ns()}.json"
    spec.write_text(json.dumps(jobs))
    proc = subprocess.run(
        ["bash", str(PEER), "flink", str(spec)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(f"peer flink failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def run_ours(
    spark: Any,
    catalog: Any,
    source: Path,
    work: Path,
    name: str,
    mode: str,
    per_trigger: int | None,
) -> float:
    """Seconds to drain ``source`` into a new table ``db.<name>`` with our sink."""
    catalog.create_table(
        f"db.{name}", schema=ARROW_SCHEMA, identifier_fields=["id"] if mode == "upsert" else None
    )
    reader = spark.readStream
    if per_trigger:
        reader = reader.option("maxFilesPerTrigger", per_trigger)
    common = {"catalog": catalog, "checkpoint_location": str(work / "chk")}
    if mode == "upsert":
        df = from_debezium(reader.text(str(source)), row_schema=ROW_SCHEMA, order_by="source.lsn")
        sink = IcebergSink(
            table=f"db.{name}",
            mode="upsert",
            row_kind_column=ROW_KIND_COLUMN,
            order_by=ORDER_COLUMN,
            state_dir=str(work / "state"),
            **common,
        )
    else:
        df = reader.schema(ROW_SCHEMA).json(str(source))
        sink = IcebergSink(table=f"db.{name}", state_dir=str(work / "state"), **common)
    elapsed, _ = drain_into(sink, df)
    return elapsed


def table_rows(catalog: Any, name: str) -> dict[str, list[Any]]:
    """The table's rows by id, as columns of Python values (nullability aside: Flink's
    append table has no key, so its ``id`` is optional)."""
    t = catalog.load_table(f"db.{name}").scan().to_arrow().select(list(ARROW_SCHEMA.names))
    return dict(t.sort_by("id").to_pydict())


SETTINGS = ("default", "equal")


def flink_side(root: Path, inputs: dict[str, list[Path]], rounds: int) -> dict[str, Any]:
    """Flink's runs: a warm-up per mode, ``rounds`` defaults runs per mode on one JVM,
    then ``rounds`` equal-commits runs per mode (interval: the defaults' median time
    divided by the file count) on a second; their times, commit counts and peak RSS."""
    files = len(inputs[MODES[0]])
    jobs = [flink_job(root, f"warm_{m}", m, inputs[m][:1], 0) for m in MODES]
    jobs += [
        flink_job(root, f"default_{m}_{r}", m, inputs[m], 0) for r in range(rounds) for m in MODES
    ]
    first = run_flink(root, jobs)[len(MODES) :]
    times = {
        ("default", m): [a["seconds"] for a in first[i :: len(MODES)]] for i, m in enumerate(MODES)
    }
    interval = {
        m: max(100, int(1000 * statistics.median(times[("default", m)]) / files)) for m in MODES
    }
    second = run_flink(
        root,
        [
            flink_job(root, f"equal_{m}_{r}", m, inputs[m], interval[m])
            for r in range(rounds)
            for m in MODES
        ],
    )
    for i, m in enumerate(MODES):
        times[("equal", m)] = [a["seconds"] for a in second[i :: len(MODES)]]
    commits = {
        (s, m): answers[i]["tables"][f"db.{s}_{m}_0"]["snapshots"]
        for s, answers in (("default", first), ("equal", second))
        for i, m in enumerate(MODES)
    }
    mib = max(r["jvm_peak_mib"] for r in first + second)
    return {"times": times, "interval": interval, "commits": commits, "mib": mib}


def our_side(root: Path, ours: Any, inputs: dict[str, list[Path]], rounds: int) -> dict[str, Any]:
    """Our runs: a warm-up per mode, then ``rounds`` rounds of every setting and mode, in
    one Spark session; their times, commit counts and the JVM's peak RSS."""
    spark = local_session("bench-flink-peer")
    for m in MODES:  # warm-up: the first file
        (root / "warm" / m).mkdir(parents=True)
        shutil.copy(inputs[m][0], root / "warm" / m)
        run_ours(spark, ours, root / "warm" / m, root / "work" / f"warm_{m}", f"warm_{m}", m, None)
    times: dict[tuple[str, str], list[float]] = {(s, m): [] for s in SETTINGS for m in MODES}
    for r in range(rounds):
        for setting, per_trigger in (("default", None), ("equal", 1)):
            for m in MODES:
                name = f"{setting}_{m}_{r}"
                times[(setting, m)].append(
                    run_ours(spark, ours, root / m, root / "work" / name, name, m, per_trigger)
                )
    commits = {
        (s, m): len(ours.load_table(f"db.{s}_{m}_0").snapshots()) for s in SETTINGS for m in MODES
    }
    mib = jvm_peak_mib(spark)
    spark.stop()
    return {"times": times, "commits": commits, "mib": mib}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--rows", type=int, default=50_000)
    p.add_argument("--rounds", type=int, default=3, help="timed runs per side, mode and setting")
    a = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-flink-"))
    total = a.files * a.rows
    print(f"load average at start: {os.getloadavg()}", flush=True)
    try:
        write_inputs(root, a.files, a.rows)
        inputs = {m: sorted((root / m).glob("*.json")) for m in MODES}
        ours = ss.load_catalog("bench", type="hadoop", warehouse=str(root / "warehouse"))
        ours.create_namespace("db")
        flink_cat = ss.load_catalog("flink", type="hadoop", warehouse=str(root / "flink-warehouse"))
        flink = flink_side(root, inputs, a.rounds)
        mine = our_side(root, ours, inputs, a.rounds)
        print(
            f"{a.files} files x {a.rows:,} changes = {total:,} per mode, parallelism 2, "
            f"one untimed warm-up run per side and mode, then {a.rounds} timed rounds "
            "(medians; every round's two tables identical)"
        )
        for setting in SETTINGS:
            for m in MODES:
                key = (setting, m)
                for r in range(a.rounds):
                    name = f"{setting}_{m}_{r}"
                    if table_rows(ours, name) != table_rows(flink_cat, name):
                        raise SystemExit(f"{setting} {m} round {r}: the two tables differ")
                f_t, o_t = flink["times"][key], mine["times"][key]
                f_s, o_s = statistics.median(f_t), statistics.median(o_t)
                extra = (
                    f", Flink checkpoint every {flink['interval'][m]} ms"
                    if setting == "equal"
                    else ""
                )
                print(
                    f"  {m:6s} {setting:7s}: Flink {f_s:6.2f} s {total / f_s:10,.0f} rows/s "
                    f"({flink['commits'][key]} commits{extra}; runs {_runs(f_t)}) | ours "
                    f"{o_s:6.2f} s {total / o_s:10,.0f} rows/s ({mine['commits'][key]} commits; "
                    f"runs {_runs(o_t)}) | ours / Flink rows/s {f_s / o_s:.2f}x (goal >= 1.0)"
                )
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"  peak RSS: Flink JVM {flink['mib']:,.0f} MiB (all its jobs); ours: Spark JVM "
            f"{mine['mib']:,.0f} MiB, driver Python {own:,.0f} MiB"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average at end: {os.getloadavg()}")


def _runs(times: list[float]) -> str:
    return ", ".join(f"{t:.2f}" for t in times)


if __name__ == "__main__":
    main()

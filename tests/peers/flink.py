"""Flink's own Iceberg sink beside ours: Flink SQL (pyflink, local mode) reading JSON files
from a filesystem source into Iceberg tables of a Hadoop catalog through Flink's
``IcebergSink``. Run through the ``peer`` launcher beside this file (``peer flink SPEC``),
which installs the set ``flink`` (pyflink from PyPI, Iceberg's Flink runtime and Hadoop's
client jars from Maven) and passes the jars in ``$STREAM_SINK_PEER_JARS``. Imports nothing
but pyflink, so it runs in the set's own venv.

SPEC is a JSON file::

    {"warehouse": DIR, "parallelism": 2, "checkpoint_ms": 1000, "aligned": false,
     "pipelines": [{"table": "db.t", "columns": "id BIGINT, data STRING",
                    "key": ["id"], "format": "debezium-json", "upsert": true,
                    "source": DIR, "files": [FILE, ...]}]}

Each pipeline is a source table over ``source`` (``format``: ``debezium-json``, a changelog,
or ``json``, plain rows) and an Iceberg table ``hc.<table>`` (format version 2, primary
key ``key`` when given) written by ``INSERT INTO … /*+ OPTIONS('upsert-enabled'=…) */``;
all pipelines run as one job (one statement set), in streaming mode with a checkpoint
every ``checkpoint_ms`` (Flink's Iceberg sink commits on checkpoints).

- ``aligned`` false: ``files`` are copied into ``source`` first and read once (a bounded
  source); the job ends when they are read, committing the rest at the end of its input.
- ``aligned`` true: the source watches ``source``; the files are copied into it one at a
  time, each only once everything the previous one wrote is committed (counted in the
  snapshot summaries: a data row per insert or update, in upsert mode also a delete per
  insert, update or delete), so each file's changes end in a snapshot of their own
  (or a few, when a checkpoint fell while it was read) and keep their order across files
  (two files read at once could be read in either order). The job is cancelled after the
  last file.

SPEC may also be a list of such objects: jobs run one after another on one JVM.
Prints one JSON line per job: ``{"seconds": …, "jvm_peak_mib": …, "tables": {table:
{"location": …, "snapshots": N, "after_file": [snapshot id after each file (aligned
only)]}}}``; ``seconds`` is the job's wall time from submission to its end (or to the
last file's commit, aligned), ``jvm_peak_mib`` the JVM's peak resident memory so far.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from typing import Any

POLL_S = 0.05
TIMEOUT_S = float(os.environ.get("STREAM_SINK_FLINK_TIMEOUT_S", "300"))


def table_env(spec: dict[str, Any]) -> Any:
    """A streaming TableEnvironment in local mode with the set's jars and catalog ``hc``."""
    from pyflink.table import EnvironmentSettings, TableEnvironment

    # on the JVM's class path (pyflink adds $HADOOP_CLASSPATH to it): Iceberg's catalog
    # loads Hadoop's classes through the application class loader, where pipeline.jars
    # are not
    os.environ["HADOOP_CLASSPATH"] = os.environ["STREAM_SINK_PEER_JARS"].replace(",", os.pathsep)
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = env.get_config()
    conf.set("parallelism.default", str(spec.get("parallelism", 2)))
    if spec.get("checkpoint_ms", 1000):  # 0: none (a bounded job commits at its end)
        conf.set("execution.checkpointing.interval", f"{spec.get('checkpoint_ms', 1000)}ms")
    conf.set("table.exec.iceberg.use-v2-sink", "true")  # IcebergSink, not the older FlinkSink
    conf.set("table.exec.sink.upsert-materialize", "NONE")  # rows as the source orders them
    warehouse = os.path.abspath(spec["warehouse"])
    env.execute_sql(
        "CREATE CATALOG hc WITH ('type'='iceberg', 'catalog-type'='hadoop', "
        f"'warehouse'='file://{warehouse}')"
    ).wait()
    return env


def create_tables(env: Any, i: int, p: dict[str, Any], watch: bool) -> str:
    """Source ``src<i>`` and Iceberg table ``hc.<table>`` of pipeline ``p``; the INSERT."""
    key = p.get("key") or []
    pk = f", PRIMARY KEY ({', '.join(key)}) NOT ENFORCED" if key else ""
    source = os.path.abspath(p["source"])
    monitor = ", 'source.monitor-interval'='100ms'" if watch else ""
    env.execute_sql(
        f"CREATE TEMPORARY TABLE src{i} ({p['columns']}{pk}) WITH ('connector'='filesystem', "
        f"'path'='file://{source}', 'format'='{p['format']}'{monitor})"
    ).wait()
    db, name = (f"`{part}`" for part in p["table"].split("."))  # `append` is a keyword
    env.execute_sql(f"CREATE DATABASE IF NOT EXISTS hc.{db}").wait()
    env.execute_sql(
        f"CREATE TABLE hc.{db}.{name} ({p['columns']}{pk}) WITH ('format-version'='2')"
    ).wait()
    upsert = "true" if p.get("upsert") else "false"
    return (
        f"INSERT INTO hc.{db}.{name} /*+ OPTIONS('upsert-enabled'='{upsert}') */ "
        f"SELECT * FROM src{i}"
    )


def location(spec: dict[str, Any], table: str) -> str:
    return os.path.join(os.path.abspath(spec["warehouse"]), *table.split("."))


def snapshots(table_dir: str) -> list[dict[str, Any]]:
    """The table's snapshots in commit order, from the metadata file its hint names."""
    meta = os.path.join(table_dir, "metadata")
    try:
        with open(os.path.join(meta, "version-hint.text")) as f:
            version = f.read().strip()
        with open(os.path.join(meta, f"v{version}.metadata.json")) as f:
            return list(json.load(f).get("snapshots", []))
    except (FileNotFoundError, ValueError):  # no commit yet, or a file being replaced
        return []


def expected_counts(path: str, fmt: str, upsert: bool) -> tuple[int, int]:
    """(data rows, deletes) Flink's IcebergSink writes for the changes in file ``path``."""
    rows = deletes = 0
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            op = json.loads(line).get("op") if fmt == "debezium-json" else "c"
            if op in ("c", "r", "u"):
                rows += 1
                deletes += 1 if upsert else 0
            elif op == "d":
                deletes += 1
    return rows, deletes


def committed_counts(snaps: list[dict[str, Any]], after: int) -> tuple[int, int]:
    """(added rows, added deletes) in the snapshots after the first ``after``."""
    rows = deletes = 0
    for s in snaps[after:]:
        summary = s.get("summary", {})
        rows += int(summary.get("added-records", 0))
        deletes += int(summary.get("added-equality-deletes", 0))
        deletes += int(summary.get("added-position-deletes", 0))
    return rows, deletes


def copy_in(path: str, source: str) -> None:
    """``path`` into ``source`` whole: written under a hidden name (the source skips
    those), then renamed."""
    name = os.path.basename(path)
    tmp = os.path.join(source, "." + name + ".tmp")
    shutil.copyfile(path, tmp)
    os.rename(tmp, os.path.join(source, name))


def feed_aligned(spec: dict[str, Any], job: Any) -> dict[str, list[int]]:
    """Copy the pipelines' i-th files in together, wait until each pipeline's table holds
    what its file writes, then the next; the snapshot id of each table after each file."""
    pipes = spec["pipelines"]
    after: dict[str, list[int]] = {p["table"]: [] for p in pipes}
    seen = {p["table"]: 0 for p in pipes}
    for i in range(max(len(p["files"]) for p in pipes)):
        waiting = {}
        for p in pipes:
            if i < len(p["files"]):
                copy_in(p["files"][i], os.path.abspath(p["source"]))
                want = expected_counts(p["files"][i], p["format"], bool(p.get("upsert")))
                waiting[p["table"]] = want
        deadline = time.monotonic() + TIMEOUT_S
        while waiting:
            for table, want in list(waiting.items()):
                snaps = snapshots(location(spec, table))
                got = committed_counts(snaps, seen[table])
                if got[0] > want[0] or got[1] > want[1]:
                    raise RuntimeError(f"{table}: file {i} committed {got}, expected {want}")
                if got == want:
                    seen[table] = len(snaps)
                    after[table].append(int(snaps[-1]["snapshot-id"]))
                    del waiting[table]
            if time.monotonic() > deadline:
                raise RuntimeError(f"file {i}: no commit of {sorted(waiting)} in {TIMEOUT_S} s")
            status = str(job.get_job_status().result())
            if status in ("FAILED", "CANCELED"):
                raise RuntimeError(f"the Flink job ended ({status}) at file {i}")
            time.sleep(POLL_S)
    return after


def run(spec: dict[str, Any]) -> dict[str, Any]:
    aligned = bool(spec.get("aligned"))
    for p in spec["pipelines"]:
        os.makedirs(p["source"], exist_ok=True)
        if not aligned:
            for path in p["files"]:
                copy_in(path, os.path.abspath(p["source"]))
    env = table_env(spec)
    statements = env.create_statement_set()
    for i, p in enumerate(spec["pipelines"]):
        statements.add_insert_sql(create_tables(env, i, p, watch=aligned))
    start = time.monotonic()
    result = statements.execute()
    job = result.get_job_client()
    after: dict[str, list[int]] = {}
    if aligned:
        after = feed_aligned(spec, job)
        seconds = time.monotonic() - start
        job.cancel().result()
    else:
        result.wait()
        seconds = time.monotonic() - start
    tables = {}
    for p in spec["pipelines"]:
        snaps = snapshots(location(spec, p["table"]))
        tables[p["table"]] = {
            "location": location(spec, p["table"]),
            "after_file": after.get(p["table"]),
            "snapshots": len(snaps),
        }
    return {"seconds": round(seconds, 3), "tables": tables, "jvm_peak_mib": jvm_peak_mib()}


def jvm_peak_mib() -> float:
    """Peak resident memory (VmHWM) of the JVM pyflink started (a child of this
    process), so far; 0 when it cannot be read."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != os.getpid():
                continue
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return round(int(line.split()[1]) / 1024, 1)
        except (OSError, ValueError, IndexError):
            continue
    return 0.0


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: peer flink SPEC.json", file=sys.stderr)
        return 2
    # the answer on a descriptor of its own; the JVM's console log (its stdout, which
    # the gateway inherits) goes to stderr
    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    # Flink's log file beside the warehouse, not inside the installed pyflink package
    os.environ.setdefault(
        "FLINK_LOG_DIR", os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), "flink-log")
    )
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    for one in spec if isinstance(spec, list) else [spec]:  # several jobs: one after another
        try:
            out = run(one)
        except Exception as e:  # the Java exception text is the useful part
            print(f"peer flink: {type(e).__name__}: {str(e)[:4000]}", file=sys.stderr)
            return 1
        answer.write(json.dumps(out) + "\n")
        answer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

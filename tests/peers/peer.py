"""Apache Iceberg's and Delta Lake's own implementations on Spark, driven from the command
line: run through the ``peer`` launcher beside this file, which installs the pyspark and the
jars of a peer set and passes the jars in ``$STREAM_SINK_PEER_JARS``. See that launcher for
usage. Imports nothing but pyspark, so it runs in the set's own venv.

``peer.py serve iceberg|delta`` keeps one JVM for many commands (``readers.py`` uses it
so that a test run starts each peer's JVM once): see ``serve``."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
from typing import Any

ICEBERG_CONF = {
    "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
}
DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # the log replay's shuffle: its default of 50 partitions costs seconds per small table
    "spark.databricks.delta.snapshotPartitions": "2",
}


class UsageError(Exception):
    """Bad arguments: exit 2."""


def newest_metadata(location: str) -> str:
    """The metadata file to read for an Iceberg ``location`` (a table directory or a file):
    the one version-hint.text names, else the highest version (newest mtime on a tie)."""
    if location.endswith(".json"):
        return location
    meta = os.path.join(location, "metadata")
    if not os.path.isdir(meta):
        raise UsageError(f"no metadata directory under {location}")
    hint = os.path.join(meta, "version-hint.text")
    if os.path.exists(hint):
        with open(hint) as f:
            version = f.read().strip()
        for name in (f"v{version}.metadata.json", f"v{version}.gz.metadata.json"):
            if os.path.exists(os.path.join(meta, name)):
                return os.path.join(meta, name)
    best: tuple[tuple[int, float], str] | None = None
    for name in os.listdir(meta):
        m = re.match(r"^v?(\d+)[-.].*metadata\.json$", name)
        if m:
            key = (int(m.group(1)), os.path.getmtime(os.path.join(meta, name)))
            if best is None or key > best[0]:
                best = (key, name)
    if best is None:
        raise UsageError(f"no metadata file in {meta}")
    return os.path.join(meta, best[1])


_SERVED: Any = None
"""``serve``: the one session whose JVM every request shares (None: one session per run)."""


def session(conf: dict[str, str]) -> Any:
    """One local Spark session with the set's jars, UTC and microsecond timestamps. Under
    ``serve`` a fresh session (its own SQL settings and catalogs) on the served JVM."""
    if _SERVED is not None:
        s = _SERVED.newSession()
        for k, v in conf.items():
            if k != "spark.sql.extensions":  # static: the served session has them
                s.conf.set(k, v)
        return s
    from pyspark.sql import SparkSession

    b = (
        SparkSession.builder.master("local[2]")
        .appName("peer")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.jars", os.environ["STREAM_SINK_PEER_JARS"])
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        # a short-lived JVM over small tables: the quick JIT tier starts sooner
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
        # on a busy machine a late heartbeat must not lose the (local) executor
        .config("spark.executor.heartbeatInterval", "60s")
        .config("spark.network.timeout", "600s")
    )
    for k, v in conf.items():
        b = b.config(k, v)
    s = b.getOrCreate()
    s.sparkContext.setLogLevel("ERROR")
    return s


def emit(df: Any, out: str | None) -> None:
    """``df`` as Parquet under ``out``, or as JSON lines; then ``# rows=N``."""
    if out:
        df.write.mode("overwrite").parquet(out)
        n = df.count()
    else:
        n = 0
        for line in df.toJSON().toLocalIterator():
            print(line)
            n += 1
    print(f"# rows={n}", flush=True)


def out_dir(out: str | None, count: int, i: int) -> str | None:
    """Where the i-th of ``count`` results goes: OUT itself for one, OUT/<i> for several."""
    if out is None or count == 1:
        return out
    return os.path.join(out, str(i))


def read_iceberg(a: argparse.Namespace) -> None:
    s = session(ICEBERG_CONF)
    if a.generic:
        for i, loc in enumerate(a.location):
            df = read_generic(s, loc, a.snapshot_id, a.where or [])
            emit(df, out_dir(a.out, len(a.location), i))
        return
    for i, loc in enumerate(a.location):
        path, _, snap = loc.partition("@")
        reader = s.read.format("iceberg")
        snapshot_id = int(snap) if snap else a.snapshot_id
        if snapshot_id is not None:  # Iceberg 1.12 refuses its own "snapshot-id" option
            reader = reader.option("versionAsOf", snapshot_id)
        if a.ref:
            reader = reader.option("branch", a.ref)
        emit(reader.load(newest_metadata(path)), out_dir(a.out, len(a.location), i))


def read_generic(s: Any, location: str, snapshot_id: int | None, where: list[str]) -> Any:
    """The rows of an Iceberg table as Iceberg Java's own generic reader (``IcebergGenerics``,
    no Spark types: it reads what Spark cannot, such as nanosecond timestamps) returns
    them, deletes applied; every value as its Java ``toString`` text. With ``where``
    (``COLUMN=TEXT`` equality filters, Java converting the text to the column's type) the
    data files Java's scan planning keeps instead (one column ``file``): pruned by its own
    partition transforms and bounds."""
    from pyspark.sql import types as st

    path, _, snap = location.partition("@")
    jvm = s.sparkContext._jvm
    tables = jvm.org.apache.iceberg.hadoop.HadoopTables(s.sparkContext._jsc.hadoopConfiguration())
    table = tables.load(newest_metadata(path))
    chosen = int(snap) if snap else snapshot_id
    if where:
        scan = table.newScan()
        scan = scan.useSnapshot(chosen) if chosen is not None else scan
        for condition in where:
            column, sep, text = condition.partition("=")
            if not sep:
                raise UsageError(f"--where wants COLUMN=VALUE, not {condition!r}")
            scan = scan.filter(jvm.org.apache.iceberg.expressions.Expressions.equal(column, text))
        tasks = scan.planFiles()
        files = []
        try:
            it = tasks.iterator()
            while it.hasNext():
                files.append([str(it.next().file().location())])
        finally:
            tasks.close()
        return s.createDataFrame(files, st.StructType([st.StructField("file", st.StringType())]))
    scan = jvm.org.apache.iceberg.data.IcebergGenerics.read(table)
    if chosen is not None:
        scan = scan.useSnapshot(chosen)
    names = [c.name() for c in table.schema().columns()]
    rows = []
    records = scan.build()
    try:
        it = records.iterator()
        while it.hasNext():
            record = it.next()
            rows.append([_text(record.get(i)) for i in range(len(names))])
    finally:
        records.close()
    schema = st.StructType([st.StructField(n, st.StringType()) for n in names])
    return s.createDataFrame(rows, schema)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def sql_iceberg(a: argparse.Namespace) -> None:
    conf = dict(ICEBERG_CONF)
    if a.warehouse:
        conf["spark.sql.catalog.hc"] = "org.apache.iceberg.spark.SparkCatalog"
        conf["spark.sql.catalog.hc.type"] = "hadoop"
        conf["spark.sql.catalog.hc.warehouse"] = os.path.abspath(a.warehouse)
    for item in a.conf or []:  # e.g. a REST catalog: spark.sql.catalog.rc.type=rest
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--conf wants KEY=VALUE, not {item!r}")
        conf[key] = value
    run_sql(session(conf), a.statement, a.out)


def run_sql(s: Any, statements: list[str], out: str | None) -> None:
    for stmt in statements[:-1]:
        s.sql(stmt).collect()
    emit(s.sql(statements[-1]), out)


def read_delta(a: argparse.Namespace) -> None:
    s = session(DELTA_CONF)
    for i, loc in enumerate(a.table):
        path, _, version = loc.rpartition("@") if "@" in loc else (loc, "", "")
        reader = s.read.format("delta")
        if version:
            reader = reader.option("versionAsOf", int(version))
        emit(reader.load(os.path.abspath(path)), out_dir(a.out, len(a.table), i))


def stream_into_delta(s: Any, source: str, table: str, checkpoint: str) -> None:
    """Delta's own streaming sink: the JSON files under ``source`` into ``table``, one file
    per micro-batch (Spark's file source takes them in modification time order)."""
    schema = s.read.json(source).schema
    query = (
        s.readStream.format("json")
        .schema(schema)
        .option("maxFilesPerTrigger", 1)
        .load(source)
        .writeStream.format("delta")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start(os.path.abspath(table))
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))


def sql_delta(a: argparse.Namespace) -> None:
    s = session(DELTA_CONF)
    for source, table, checkpoint in a.stream or []:
        stream_into_delta(s, source, table, checkpoint)
    run_sql(s, a.statement, a.out)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="peer")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("read", help="read Iceberg tables")
    r.add_argument("location", nargs="+", help="LOCATION[@SNAPSHOT_ID]; several need --out")
    r.add_argument("--snapshot-id", type=int)
    r.add_argument("--ref")
    r.add_argument(
        "--generic",
        action="store_true",
        help="read with Iceberg's generic Java reader (no Spark types), values as text",
    )
    r.add_argument(
        "--where", action="append", help="COLUMN=VALUE: the data files Java plans (with --generic)"
    )
    r.add_argument("--out", help="write Parquet (OUT, or OUT/<i> for the i-th) instead")
    q = sub.add_parser("sql", help="Spark SQL over the Iceberg Hadoop catalog `hc`")
    q.add_argument("--warehouse", help="the Hadoop catalog `hc`'s warehouse directory")
    q.add_argument("--conf", action="append", help="KEY=VALUE Spark conf (other catalogs)")
    q.add_argument("statement", nargs="+", help="run in order; the last one's result is emitted")
    q.add_argument("--out")
    d = sub.add_parser("delta", help="Delta Lake on Spark").add_subparsers(
        dest="delta_cmd", required=True
    )
    dr = d.add_parser("read")
    dr.add_argument("table", nargs="+", help="TABLE[@VERSION]; several need --out")
    dr.add_argument("--out")
    ds = d.add_parser("sql")
    ds.add_argument("--stream", nargs=3, action="append", metavar=("SOURCE", "TABLE", "CHECKPOINT"))
    ds.add_argument("statement", nargs="+", help="run in order; the last one's result is emitted")
    ds.add_argument("--out")
    return p


def run(argv: list[str]) -> int:
    """One command line (without ``serve``): its exit status."""
    a = parser().parse_args(argv)
    several = a.location if a.cmd == "read" else getattr(a, "table", None)
    if several and len(several) > 1 and not a.out:
        print("peer: several tables need --out", file=sys.stderr)
        return 2
    command = {"read": read_iceberg, "sql": sql_iceberg}.get(a.cmd)
    if command is None:
        command = read_delta if a.delta_cmd == "read" else sql_delta
    try:
        command(a)
    except UsageError as e:
        print(f"peer: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # the Java exception text is the useful part
        print(f"peer: {type(e).__name__}: {str(e)[:4000]}", file=sys.stderr)
        return 1
    return 0


def serve(kind: str) -> int:
    """One JVM for many commands: each line of stdin is a JSON list of arguments (a
    command line without ``serve``); each answer is one JSON line on stdout,
    ``{"rc": …, "stdout": …, "stderr": …}``. Ends at the end of stdin."""
    global _SERVED
    # answers on a descriptor of their own; whatever else writes to fd 1 (the JVM's
    # System.out, pyspark) goes to stderr and cannot corrupt them
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    _SERVED = session(DELTA_CONF if kind == "delta" else ICEBERG_CONF)
    for line in sys.stdin:
        if not line.strip():
            continue
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = run(json.loads(line))
            except SystemExit as e:  # argparse's usage errors
                rc = e.code if isinstance(e.code, int) else 2
        answers.write(json.dumps({"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()}))
        answers.write("\n")
        answers.flush()
    return 0


def main() -> int:
    if sys.argv[1:2] == ["serve"]:
        return serve(sys.argv[2] if len(sys.argv) > 2 else "iceberg")
    return run(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())

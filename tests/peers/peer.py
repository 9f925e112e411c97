"""Apache Iceberg's and Delta Lake's own implementations on Spark, driven from the command
line: run through the ``peer`` launcher beside this file, which installs the pyspark and the
jars of a peer set and passes the jars in ``$STREAM_SINK_PEER_JARS``. See that launcher for
usage. Imports nothing but pyspark, so it runs in the set's own venv."""

from __future__ import annotations

import argparse
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


def session(conf: dict[str, str]) -> Any:
    """One local Spark session with the set's jars, UTC and microsecond timestamps."""
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
    for i, loc in enumerate(a.location):
        path, _, snap = loc.partition("@")
        reader = s.read.format("iceberg")
        snapshot_id = int(snap) if snap else a.snapshot_id
        if snapshot_id is not None:
            reader = reader.option("snapshot-id", snapshot_id)
        if a.ref:
            reader = reader.option("branch", a.ref)
        emit(reader.load(newest_metadata(path)), out_dir(a.out, len(a.location), i))


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


def main() -> int:
    a = parser().parse_args()
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


if __name__ == "__main__":
    sys.exit(main())

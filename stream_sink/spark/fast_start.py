"""A faster driver start: Spark's classes mapped from a class data sharing archive.

A restarted driver spends its first seconds in the JVM loading, parsing and verifying
the thousands of classes Spark's session and streaming engine need. Java (13 and newer)
can map them from an archive a previous JVM wrote instead (dynamic AppCDS:
``-XX:ArchiveClassesAtExit`` writes one when a JVM exits, ``-XX:SharedArchiveFile``
maps it). :func:`java_options` returns the driver JVM option that maps the archive for
this Java, pyspark and class path, making the archive first when there is none:
:func:`create_archive` runs a short training session (a local session, a streaming
query from a Parquet directory into ``foreachBatch`` with an Arrow UDF and a Parquet
write, then a restart of it) in a process of its own, whose JVM writes the archive when
it exits. ``local_session(fast_start=True)`` adds the option to
``spark.driver.extraJavaOptions``; on a cluster the same option goes to the driver's
``--driver-java-options`` (``python -m stream_sink.spark.fast_start`` prints it).

Invariants:
- An archive is used only when it is whole: the training JVM writes it under a name of
  its own, and it is renamed into place only once that JVM exited with status 0 (a
  truncated archive crashes the JVM that maps it).
- An archive's name is derived from everything the JVM checks it against (the java
  executable and its release, pyspark's version and jars, the driver's extra class
  path), so a changed installation gets a new archive instead of a rejected one. A JVM
  that still finds an archive unfit maps none and starts as without it.
- A failed training run is recorded beside the archive (``.failed``, its reason and log
  named) and not retried until that file is removed: a fast start never makes later
  starts slower, and never stops one (without an archive the option is empty).
- Archives live in ``$STREAM_SINK_JVM_ARCHIVE_HOME`` (default
  ``~/.cache/stream-sink/jvm``): 150-190 MB each.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
ARCHIVE_HOME = "STREAM_SINK_JVM_ARCHIVE_HOME"
TRAINING_TIMEOUT_S = 600.0
TRAINING_MODULE = "stream_sink.spark.fast_start"
_SHAPING_KEYS = ("spark.driver.extraClassPath", DRIVER_JAVA_OPTIONS)
"""Conf entries that change the driver JVM's class path or flags: part of the key."""
SUBMIT_ARGS = "PYSPARK_SUBMIT_ARGS"
"""pyspark's ``spark-submit`` arguments: a ``--driver-java-options`` there replaces
``spark.driver.extraJavaOptions`` (so the archive is neither made nor mapped: pass
:func:`java_options` there instead); part of the key."""


def archive_home() -> Path:
    home = os.environ.get(ARCHIVE_HOME)
    return Path(home) if home else Path.home() / ".cache" / "stream-sink" / "jvm"


def archive_path(conf: Mapping[str, str] | None = None) -> Path:
    """Where the archive for this Java, pyspark and ``conf``'s class path lives."""
    import pyspark

    java = _java_executable()
    release = Path(java).resolve().parents[1] / "release"
    parts = {
        "java": str(Path(java).resolve()),
        "release": release.read_text(errors="replace") if release.is_file() else "",
        "pyspark": pyspark.__version__,
        "spark_home": os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__),
        "submit_args": os.environ.get(SUBMIT_ARGS, ""),
        **{k: (conf or {}).get(k, "") for k in _SHAPING_KEYS},
    }
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]
    return archive_home() / f"spark-{pyspark.__version__}-{digest}.jsa"


def java_options(conf: Mapping[str, str] | None = None, *, create: bool = True) -> str:
    """The driver JVM option mapping the class archive (made first when missing and
    ``create``); empty when there is none to use."""
    path = archive_path(conf)
    if not path.is_file() and create and not _failed(path).exists():
        create_archive(conf)
    if not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path}"


def with_fast_start(conf: Mapping[str, str]) -> dict[str, str]:
    """``conf`` with :func:`java_options` appended to the driver's JVM options."""
    out = dict(conf)
    option = java_options(conf)
    if option:
        given = out.get(DRIVER_JAVA_OPTIONS, "").strip()
        out[DRIVER_JAVA_OPTIONS] = f"{given} {option}".strip()
    return out


def create_archive(conf: Mapping[str, str] | None = None) -> Path | None:
    """Run the training session in a process of its own and put its archive in place;
    the archive, or None (logged, and recorded in ``.failed`` where that can be
    written) when it could not be made."""
    path = archive_path(conf)
    logfile = path.with_suffix(".log")
    log.warning("creating the driver JVM's class archive %s (once, 30-60 s)", path)
    started = time.monotonic()
    cmd = [sys.executable, "-m", TRAINING_MODULE, "train", str(path), json.dumps(dict(conf or {}))]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_abandoned(path)
        with open(logfile, "wb") as out:
            proc = subprocess.run(
                cmd, stdout=out, stderr=subprocess.STDOUT, timeout=TRAINING_TIMEOUT_S
            )
        reason = f"exit status {proc.returncode}"
    except (OSError, subprocess.TimeoutExpired) as e:
        reason = str(e)
    if path.is_file():
        log.warning("class archive %s made in %.0f s", path, time.monotonic() - started)
        return path
    log.warning(
        "no class archive for the driver JVM (%s; see %s): drivers start without one; "
        "remove %s to try again",
        reason,
        logfile,
        _failed(path),
    )
    try:
        _failed(path).write_text(f"{reason}; the training run's output: {logfile}\n")
    except OSError as e:
        log.warning("could not record the failed training run at %s: %s", _failed(path), e)
    return None


def _failed(path: Path) -> Path:
    return path.with_suffix(".failed")


def _remove_abandoned(path: Path) -> None:
    """Delete partial archives of training runs whose process is gone."""
    for partial in path.parent.glob(f"{path.name}.*.part"):
        pid = partial.name.rsplit(".", 2)[-2]
        if pid.isdigit() and not _alive(int(pid)):
            partial.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _java_executable() -> str:
    """The java pyspark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        return os.path.join(home, "bin", "java")
    return shutil.which("java") or "java"


# --- the training run (its own process) ----------------------------------------------------


def train(path: Path, conf: Mapping[str, str]) -> int:
    """Start a JVM writing the archive at exit, exercise a streaming restart, end the
    JVM and wait for it; rename the archive into place when the JVM exited with 0."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from stream_sink.spark.session import ensure_python_env

    ensure_python_env()
    partial = path.with_name(f"{path.name}.{os.getpid()}.part")
    settings = dict(conf)
    dump = f"-XX:ArchiveClassesAtExit={partial}"
    settings[DRIVER_JAVA_OPTIONS] = f"{settings.get(DRIVER_JAVA_OPTIONS, '')} {dump}".strip()
    settings.update({"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1"})
    builder = SparkSession.builder.master("local[1]").appName("stream-sink-class-archive")
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    with tempfile.TemporaryDirectory(prefix="stream-sink-class-archive-") as work:
        _exercise(spark, Path(work))
        gateway = SparkContext._gateway
        spark.stop()
        assert gateway is not None
        proc = gateway.proc
        proc.stdin.close()  # the JVM exits at the end of its input, writing the archive
        status = proc.wait(TRAINING_TIMEOUT_S)
    if status != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        print(f"the training JVM exited with status {status}", file=sys.stderr)
        return 1
    os.replace(partial, path)
    return 0


def _exercise(spark: object, work: Path) -> None:
    """A stream from Parquet files into ``foreachBatch`` (an Arrow UDF and a Parquet
    write per batch), run twice on one checkpoint: a first start and a restart."""
    from pyspark.sql import DataFrame, SparkSession

    assert isinstance(spark, SparkSession)
    source = str(work / "in")
    spark.range(100).selectExpr("id", "cast(id as string) as name").write.parquet(source)

    def batch(df: DataFrame, batch_id: int) -> None:
        mapped = df.mapInArrow(lambda batches: batches, df.schema)
        mapped.write.mode("append").parquet(str(work / "out"))

    for _ in range(2):
        query = (
            spark.readStream.schema("id BIGINT, name STRING")
            .parquet(source)
            .writeStream.foreachBatch(batch)
            .option("checkpointLocation", str(work / "chk"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()


def main(argv: list[str]) -> int:
    """``train PATH CONF_JSON`` (the training run), or no arguments: make the archive
    when missing and print the driver JVM option (for ``--driver-java-options``)."""
    if argv[:1] == ["train"]:
        return train(Path(argv[1]), json.loads(argv[2]))
    logging.basicConfig(format="%(message)s", level=logging.INFO)
    option = java_options()
    print(option)
    return 0 if option else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

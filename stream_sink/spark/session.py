"""A local SparkSession with defaults that suit small machines and tests.

Invariants:
- Executors run the interpreter that has stream_sink installed: ``PYSPARK_PYTHON``
  is set to the running interpreter when unset (Spark's default, ``python3`` on
  PATH, usually lacks the package).
- Arrow is on (``mapInArrow`` and ``toArrow`` move Arrow batches, not rows), the UI
  is off, and shuffles use few partitions: a micro-batch of a local stream is small.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from stream_sink.secrets import SPARK_OPTIONS_REDACTION_REGEX, SPARK_REDACTION_REGEX

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOCAL_DEFAULTS: Mapping[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "1g",
    "spark.sql.streaming.stopActiveRunOnRestart": "true",
    "spark.sql.adaptive.enabled": "false",
    "spark.python.worker.reuse": "true",
    # Spark's defaults extended by the project's secret rule (stream_sink.secrets:
    # credential, header.*, API and account keys, SAS tokens, ...): masked in the UI,
    # plans and event logs
    "spark.redaction.regex": SPARK_REDACTION_REGEX,
    "spark.sql.redaction.options.regex": SPARK_OPTIONS_REDACTION_REGEX,
}
"""Applied by :func:`local_session` unless the caller's ``conf`` sets the key."""


def ensure_python_env() -> None:
    """Point Spark's Python workers (and driver) at this interpreter when unset."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def local_session(
    app_name: str = "stream-sink",
    *,
    master: str = "local[2]",
    conf: Mapping[str, str] | None = None,
    s3a: bool | Mapping[str, str] = False,
    fast_start: bool = False,
) -> SparkSession:
    """Get or create a SparkSession on ``master`` with :data:`LOCAL_DEFAULTS`.

    ``master`` may also be a cluster URL (``spark://host:7077``); the defaults then
    still apply unless ``conf`` overrides them. ``s3a`` puts Spark's ``s3a://``
    filesystem on the classpath (hadoop-aws of pyspark's Hadoop version and the AWS SDK
    bundle, resolved once by ``scripts/s3a-jars.sh``) so ``checkpointLocation`` may be on
    an object store; a map of ``s3.*`` properties also points s3a at that store.
    ``fast_start`` maps Spark's classes into the driver JVM from a class archive
    (:mod:`stream_sink.spark.fast_start`; made once, by a training run, when missing),
    which takes seconds off every start and restart of the driver.
    """
    ensure_python_env()
    from pyspark.sql import SparkSession

    settings = {**LOCAL_DEFAULTS, **_s3a_conf(s3a, master), **(conf or {})}
    if fast_start and not _jvm_running():
        from stream_sink.spark.fast_start import with_fast_start

        settings = with_fast_start(settings)
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _jvm_running() -> bool:
    """True when this process already has Spark's JVM (its options are then fixed)."""
    from pyspark import SparkContext

    return SparkContext._gateway is not None


def _s3a_conf(s3a: bool | Mapping[str, str], master: str) -> dict[str, str]:
    """The jars and settings for ``s3a``: on the driver's classpath, and shipped to the
    executors of a cluster (local executors share the driver's JVM)."""
    if s3a is False:
        return {}
    import pyspark

    from stream_sink.io.s3a import hadoop_version, s3a_jars, s3a_settings

    jars = s3a_jars(hadoop_version(os.path.join(os.path.dirname(pyspark.__file__), "jars")))
    props = s3a if isinstance(s3a, Mapping) else {}
    conf = {"spark.driver.extraClassPath": os.pathsep.join(jars), **s3a_settings(props)}
    if not master.startswith("local"):
        conf["spark.jars"] = ",".join(jars)
    return conf

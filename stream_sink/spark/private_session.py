"""A DataFrame's plan in a private clone of its session, with settings of its own.

Spark's Parquet writer takes some settings only from the session, never from per-write
options: ``ParquetFileFormat.prepareWrite`` (v1 and v2 alike) copies
``spark.sql.parquet.fieldId.write.enabled``, ``spark.sql.parquet.outputTimestampType``,
``spark.sql.parquet.writeLegacyFormat`` and ``spark.sql.parquet.timestampNTZ.enabled``
from the session's SQLConf into the job's Hadoop configuration, overwriting whatever
``DataFrameWriter.option`` put there, and ``ParquetWriteSupport`` reads
``spark.sql.parquet.datetimeRebaseModeInWrite`` from the SQLConf of the task. Setting
them on the caller's session would show them to every other query of that session while
the write runs. Instead the write runs in a clone of the session (Spark's own
``SparkSession.cloneSession``, as every streaming query does for its batches) that holds
the settings; the caller's session is never changed.

Invariants:
- The clone shares the SparkContext, cached data and the caller's settings at the time
  of the call; settings are set on the clone only, and only those asked for.
- The DataFrame keeps its logical plan (no re-reading, no conversion to rows).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_DATASET_CLASSES = ("org.apache.spark.sql.classic.Dataset", "org.apache.spark.sql.Dataset")
"""Where ``Dataset.ofRows`` lives: Spark 4 (classic), Spark 3.5."""


def with_settings(df: DataFrame, settings: Mapping[str, str]) -> DataFrame:
    """``df`` bound to a private clone of its session where ``settings`` hold (``df``
    itself when its session already has them: nothing to scope)."""
    from pyspark.sql import DataFrame, SparkSession

    session = df.sparkSession
    conf = session.conf
    if all((conf.get(k, None) or "").upper() == v.upper() for k, v in settings.items()):
        return df
    clone = session._jsparkSession.cloneSession()
    clone_conf = clone.conf()
    for key, value in settings.items():
        clone_conf.set(key, value)
    jdf = _of_rows(session, clone, df._jdf.logicalPlan())
    return DataFrame(jdf, SparkSession(session.sparkContext, clone))


def _of_rows(session: Any, clone: Any, plan: Any) -> Any:
    from py4j.java_gateway import JavaClass

    for name in _DATASET_CLASSES:
        cls = session._jvm
        for part in name.split("."):
            cls = getattr(cls, part)
        if isinstance(cls, JavaClass):
            return cls.ofRows(clone, plan)
    raise RuntimeError(f"none of {_DATASET_CLASSES} in this Spark")  # pragma: no cover

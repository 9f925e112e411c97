"""Pre-flight: can Spark's Python workers import stream_sink?

Without the package on the executors, the first micro-batch dies in a long worker
trace ending in ``ModuleNotFoundError``. :func:`check_executors` runs one tiny task
first and turns that into one sentence saying how to fix it.

The probe function is compiled into a module that does not exist on the driver, so
Spark's pickler ships it by value: unpickling it needs no stream_sink on the worker.
"""

from __future__ import annotations

from typing import Any, Callable

from stream_sink.exceptions import ExecutorEnvironmentError

PROBE_MODULE = "stream_sink_preflight_probe"
_PROBE_SOURCE = """
def probe(_):
    import sys
    try:
        import stream_sink.spark.tasks.iceberg  # noqa: F401
    except Exception as e:
        return f"{sys.executable}: {type(e).__name__}: {e}"
    return ""
"""
HOW_TO_FIX = (
    "set PYSPARK_PYTHON (spark.pyspark.python) to a Python that has stream_sink installed, "
    "or ship it with --py-files / spark.submit.pyFiles (a wheel or zip of the package)"
)


def _probe() -> Callable[[Any], str]:
    namespace: dict[str, Any] = {"__name__": PROBE_MODULE}
    exec(compile(_PROBE_SOURCE, f"<{PROBE_MODULE}>", "exec"), namespace)
    return namespace["probe"]  # type: ignore[no-any-return]


def check_executors(spark: Any) -> None:
    """Raise ExecutorEnvironmentError unless a Spark task can import stream_sink."""
    try:
        problems = spark.sparkContext.parallelize([0], 1).map(_probe()).collect()
    except Exception as e:
        last = str(e).strip().splitlines()[-1:] or [type(e).__name__]
        raise ExecutorEnvironmentError(
            f"Spark's Python workers could not run a stream_sink task ({last[0][:300]}): "
            f"{HOW_TO_FIX}"
        ) from None
    problem = next((p for p in problems if p), "")
    if problem:
        raise ExecutorEnvironmentError(
            f"Spark's executors cannot import stream_sink ({problem}): {HOW_TO_FIX}"
        )

"""Fixtures of the change-data-capture pipeline tests: the real parts (``tests/cdc_stack.py``).

``cdc_stack``: PostgreSQL with logical decoding and a Kafka broker (KRaft) for the whole
session; tests create their own source tables and start Debezium (Kafka Connect) with
``cdc_stack.start_connect`` or their own ``Connect``. Skipped when PostgreSQL cannot be
installed or the Kafka and Debezium jars cannot be resolved.

``kafka_spark``: the shared Spark session, skipped unless it carries Spark's Kafka source.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cdc_stack import Stack, StackError


@pytest.fixture(scope="session")
def cdc_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    try:
        stack = Stack(tmp_path_factory.mktemp("cdc"))
    except StackError as e:
        pytest.skip(f"the Kafka and Debezium jars cannot be resolved: {e}")
    try:
        stack.start()
    except StackError:
        stack.stop()
        raise
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture
def kafka_spark(spark: Any) -> Any:
    if "spark-sql-kafka" not in spark.conf.get("spark.jars", ""):
        pytest.skip("Spark's Kafka source (peer set spark-kafka) could not be resolved")
    return spark

"""Fixtures of the change-data-capture pipeline tests (``cdc_stack``, the real parts,
is the root conftest's: the docs pages use it too).

``kafka_spark``: the shared Spark session, skipped unless it carries Spark's Kafka source.
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def kafka_spark(spark: Any) -> Any:
    if "spark-sql-kafka" not in spark.conf.get("spark.jars", ""):
        pytest.skip("Spark's Kafka source (peer set spark-kafka) could not be resolved")
    return spark

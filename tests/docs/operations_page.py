"""docs/operations.md's recovery runbook against a real Kafka broker: the page's topic
``orders`` (two partitions, so the recorded offsets name both) created before the page
runs, and the environment the page reads (the broker and Spark's Kafka source jars).
The page itself produces its events with Spark's Kafka sink, loses its Spark checkpoint,
recovers from the table and checks that every event landed once."""

from __future__ import annotations

from cdc_stack import Stack, peer_jars

TOPIC = "orders"


def prepare(stack: Stack) -> dict[str, str]:
    """The topic created (empty), and the environment the page reads."""
    stack.kafka.create_topic(TOPIC, partitions=2)
    return {
        "KAFKA_BOOTSTRAP_SERVERS": stack.kafka.bootstrap,
        "SPARK_KAFKA_JARS": ",".join(peer_jars("spark-kafka")),
    }

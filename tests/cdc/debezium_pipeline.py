"""The pipeline under test, shared by the CDC tests and their child-process jobs: Spark's
Kafka source → ``from_debezium`` → a sink's ``foreach_batch``, plus PostgreSQL helpers.

With ``row_schema=None`` each micro-batch's row schema is read from the events' Kafka
Connect schemas (``debezium_row_schema``), so columns added to the source table reach
the sink (whose ``schema_evolution`` adds them)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stream_sink.spark import ORDER_COLUMN, ROW_KIND_COLUMN, debezium_row_schema, from_debezium

ORDER_BY = ("source.lsn",)


def sql(url: str, *statements: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for s in statements:
            conn.execute(s)


def source_rows(url: str, table: str, columns: str = "*") -> list[tuple]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return [tuple(r) for r in conn.execute(f"SELECT {columns} FROM {table} ORDER BY pk")]


def kafka_stream(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def debezium_batches(sink: Any, row_schema: Any = None) -> Any:
    """A ``foreachBatch`` function: the batch's Debezium events as changes into ``sink``,
    every batch (one of tombstones only takes its keys' row schema), as docs/debezium.md
    writes it."""

    def apply(batch: Any, batch_id: int) -> None:
        rows = row_schema or debezium_row_schema(batch)
        sink.foreach_batch(from_debezium(batch, row_schema=rows, order_by=ORDER_BY), batch_id)

    return apply


def start(df: Any, sink: Any, row_schema: Any = None, processing_time: str | None = None) -> Any:
    """Start the query (availableNow unless ``processing_time`` is given)."""
    writer = df.writeStream.foreachBatch(debezium_batches(sink, row_schema)).option(
        "checkpointLocation", sink.spark_checkpoint_location
    )
    if processing_time:
        writer = writer.trigger(processingTime=processing_time)
    else:
        writer = writer.trigger(availableNow=True)
    return writer.start()


SINK_OPTIONS = {"mode": "upsert", "row_kind_column": ROW_KIND_COLUMN, "order_by": ORDER_COLUMN}


class Workload:
    """Random inserts, updates, primary-key changes and deletes on ``table`` (columns
    ``pk bigint PRIMARY KEY, v text, n bigint``), the only writer of it; seeded."""

    def __init__(self, url: str, table: str, seed: int, keys: int = 400) -> None:
        import random

        self.url, self.table, self.keys = url, table, keys
        self.rng = random.Random(seed)
        self.live = {r[0] for r in source_rows(url, table, "pk")}
        self.done = 0

    def _free(self) -> int:
        while True:
            pk = self.rng.randrange(1, self.keys)
            if pk not in self.live:
                return pk

    def step(self, conn: Any) -> None:
        """One transaction of one to three changes."""
        with conn.transaction():
            for _ in range(self.rng.randint(1, 3)):
                self.done += 1
                roll = self.rng.random()
                t = self.table
                if not self.live or roll < 0.4:
                    pk = self._free()
                    conn.execute(
                        f"INSERT INTO {t} VALUES (%s, %s, %s)", (pk, f"i{self.done}", self.done)
                    )
                    self.live.add(pk)
                    continue
                pk = self.rng.choice(sorted(self.live))
                if roll < 0.7:
                    conn.execute(
                        f"UPDATE {t} SET v = %s, n = %s WHERE pk = %s",
                        (f"u{self.done}", self.done, pk),
                    )
                elif roll < 0.8:
                    new = self._free()
                    conn.execute(f"UPDATE {t} SET pk = %s WHERE pk = %s", (new, pk))
                    self.live.discard(pk)
                    self.live.add(new)
                else:
                    conn.execute(f"DELETE FROM {t} WHERE pk = %s", (pk,))
                    self.live.discard(pk)

    def run(self, transactions: int, pause: float = 0.0) -> None:
        import time

        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            for _ in range(transactions):
                self.step(conn)
                if pause:
                    time.sleep(pause)


JOB = Path(__file__).with_name("cdc_job.py")


class ScriptJob:
    """``python SCRIPT ARGS…`` (a streaming driver) in its own process group, its stderr
    in ``log``, its output lines collected; Spark's Kafka source from ``jars``."""

    def __init__(
        self,
        script: Path,
        args: list[str],
        log: Path,
        jars: str,
        env: dict[str, str] | None = None,
    ) -> None:
        env = dict(env or os.environ, PYSPARK_PYTHON=sys.executable, STREAM_SINK_SPARK_JARS=jars)
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, str(script), *args],
            stdout=subprocess.PIPE,
            stderr=open(self.log, "ab"),  # noqa: SIM115 (the child holds it)
            text=True,
            env=env,
            start_new_session=True,
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def wait_batches(self, n: int, timeout: float = 240, prefix: str = "batch") -> None:
        """Wait until ``n`` more micro-batches started than when called (lines starting
        with ``prefix``)."""
        target = self.batches(prefix) + n
        deadline = time.monotonic() + timeout
        while self.batches(prefix) < target:
            assert self.proc.poll() is None, f"job exited:\n{self.log.read_text()[-4000:]}"
            assert time.monotonic() < deadline, f"no batch:\n{self.log.read_text()[-4000:]}"
            time.sleep(0.5)

    def wait_line(self, text: str, timeout: float = 240) -> None:
        """Wait until the job has printed the line ``text``."""
        deadline = time.monotonic() + timeout
        while text not in list(self.lines):
            assert self.proc.poll() is None, f"job exited:\n{self.log.read_text()[-4000:]}"
            assert time.monotonic() < deadline, f"no {text!r}:\n{self.log.read_text()[-4000:]}"
            time.sleep(0.5)

    def batches(self, prefix: str = "batch") -> int:
        return sum(1 for line in list(self.lines) if line.startswith(prefix))

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(60)

    def stop(self) -> None:
        """Stop the query gracefully: SIGTERM to the driver's Python only (its JVM, in the
        same process group, must outlive ``query.stop()``), SIGKILL to the group after
        120 s; then whatever of the group is left."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)


class Job(ScriptJob):
    """``cdc_job.py`` (see there for its arguments)."""

    def __init__(
        self,
        root: Path,
        bootstrap: str,
        topic: str,
        target: str,
        jars: str,
        row_schema: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        args = [str(root), bootstrap, topic, target, *([row_schema] if row_schema else [])]
        super().__init__(JOB, args, root / "job.log", jars, env)


def _until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(2)


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(2)

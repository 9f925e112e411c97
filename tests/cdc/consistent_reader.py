"""A reader that polls the tables one routed sink writes, throughout a run, and checks
the shop's invariants (:func:`shop_workload.violations`) at every state it observes.

Each poll is the sink's consistent read (:func:`stream_sink.commit.iceberg.consistent.
consistent_snapshots`, what ``routed_snapshots`` and ``stream-sink table consistent``
do): the three tables are loaded, the newest checkpoint all of them reached is picked,
and each table is read with our reader at its snapshot stamped at or below it, from the
same metadata the stamps came from (on Nessie, whose metadata lists only the current
snapshot, a table loaded after a later commit cannot be placed: that read is
*refused* and the next poll tries again).

Invariants:
- A state is one checkpoint of the sink's query (its stamp): it is read and checked once,
  and a violation is counted per state, however often the reader sees it.
- The reader never writes and never fails the run: a poll that cannot read (tables not
  created yet, no stamp yet, a refused read) is counted, an unexpected error kept to be
  reported; :meth:`Observer.report` gives the counts.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shop_workload import TABLES, violations

from stream_sink.catalogs import load_catalog
from stream_sink.commit.consistent import routed_operator_id
from stream_sink.commit.iceberg.consistent import consistent_snapshots
from stream_sink.exceptions import CheckpointError, NoSuchSnapshotError, NoSuchTableError


@dataclass(frozen=True)
class Target:
    """The tables ``<namespace>.orders|lines|stock`` of catalog ``catalog_name``
    (``catalog``: the other keyword arguments of ``load_catalog``; a SQL catalog's name
    picks its rows in the database), written by routed sink ``sink_id`` of the query
    that checkpoints at ``spark_checkpoint``."""

    name: str
    catalog_name: str
    catalog: Mapping[str, str]
    namespace: str
    sink_id: str
    spark_checkpoint: str

    def tables(self) -> list[str]:
        return [f"{self.namespace}.{t}" for t in TABLES]

    def open_catalog(self) -> Any:
        return load_catalog(self.catalog_name, **self.catalog)


@dataclass
class Observer:
    """Polls ``target`` every ``interval`` seconds on a thread of its own, from
    :meth:`start` to :meth:`stop`; ``states`` maps each checkpoint observed to what was
    wrong at it (empty: consistent)."""

    target: Target
    interval: float = 0.2
    states: dict[int, list[str]] = field(default_factory=dict)
    polls: int = 0
    unreadable: int = 0
    refused: int = 0
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._halt = threading.Event()
        self._job_id: str | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"observer-{self.target.name}", daemon=True
        )

    def start(self) -> Observer:
        self._thread.start()
        return self

    def _run(self) -> None:
        catalog = self.target.open_catalog()
        try:
            while not self._halt.is_set():
                self.polls += 1
                try:
                    self.poll(catalog)
                except Exception as e:  # kept for the report, never raised into the run
                    self.errors.append(f"{type(e).__name__}: {e}")
                self._halt.wait(self.interval)
        finally:
            catalog.close()

    def poll(self, catalog: Any) -> None:
        """Read the newest consistent state once and check it, unless already seen."""
        job_id = self.job_id()
        if job_id is None:
            self.unreadable += 1
            return
        names = self.target.tables()
        try:
            tables = [catalog.load_table(n) for n in names]
            read = consistent_snapshots(
                tables, job_id, [routed_operator_id(self.target.sink_id, n) for n in names]
            )
        except NoSuchTableError:
            self.unreadable += 1
            return
        except NoSuchSnapshotError:
            self.refused += 1
            return
        if read.checkpoint_id in self.states:
            return
        rows = {
            short: table.scan(snapshot_id=read.version_of(table.name)).to_arrow().to_pylist()
            for short, table in zip(TABLES, tables, strict=True)
        }
        self.states[read.checkpoint_id] = violations(rows["orders"], rows["lines"], rows["stock"])

    def job_id(self) -> str | None:
        """The query's id (kept across restarts on the same checkpoint), once it exists."""
        if self._job_id is None:
            from stream_sink.spark.query import read_query_id

            try:
                self._job_id = read_query_id(self.target.spark_checkpoint)
            except CheckpointError:
                return None
        return self._job_id

    def stop(self, timeout: float = 60) -> None:
        self._halt.set()
        self._thread.join(timeout)

    @property
    def violating(self) -> dict[int, list[str]]:
        return {c: v for c, v in self.states.items() if v}

    def report(self) -> str:
        """One line: states observed, states violating, the rest of the polls."""
        first = min(self.violating.items(), default=None)
        example = f"; first at checkpoint {first[0]}: {first[1][0]}" if first else ""
        return (
            f"{self.target.name}: {len(self.states)} states observed, "
            f"{len(self.violating)} violating, {self.polls} polls "
            f"({self.refused} refused, {self.unreadable} before the first state, "
            f"{len(self.errors)} errors){example}"
        )

"""What holding source transactions costs: a routed Debezium stream into
``IcebergSink(transactions="debezium")`` against the same stream into the same sink
without the hold, in one Spark session.

Run: ``python bench/bench_transaction_hold.py [batches] [events] [rounds] [--cut F]
[--lag F] [--seed N]`` (defaults 20 micro-batches of 20,000 change events, 3 rounds,
``--cut 0.05``, ``--lag 0.05``, seed 1). Needs pyspark.

Input, generated once (like ``tests/spark/tx_events.py``, larger): transactions of 2 to
10 change events over the three tables ``inv.customers``, ``inv.orders`` and
``shop.items`` (round robin from a random table, so a transaction of two events or more
spans tables), each event an insert of a new key (70%), an update (20%) or a delete
(10%) of a live key, with one END per transaction. The input is cut into micro-batches
the way Spark cuts Kafka topics: each table's topic ends a batch at its own offset, up
to ``2 x cut x events`` events past the nominal boundary (so about ``cut`` of all
transactions have events in two batches), and the transaction topic ends each batch
``lag x events`` events early, so the ENDs of about ``lag`` of the transactions arrive
one batch after their last change event (the transaction topic lagging). A key's
changes keep their order (one topic per table). Printed first: the fractions that came
out. (Generated in a child process: the driver's peak RSS is the runs'.)

Both modes read JSON files (one per micro-batch, ``maxFilesPerTrigger=1``, increasing
modification times, ``availableNow``) into a routed ``IcebergSink(table_column="_table",
mode="upsert", create_tables=True)`` on a SQL catalog (SQLite) with fresh directories per
run: ``baseline`` parses them with ``from_debezium(...)`` and reads the change topics
only (the same files without the END events: a query without the hold does not
subscribe the transaction topic); ``held`` reads the END events too, with
``from_debezium(..., transactions=True)`` and ``transactions="debezium"``. One untimed
run of each mode on a small input first (JVM code paths), then rounds alternating which
mode goes first. Every final table must hold exactly the keys the generator left live.

Printed per run and, at the end, per mode (medians over the rounds): the median time of
a micro-batch inside ``foreach_batch`` (``from_debezium`` and the sink, what Spark waits
for), the median interval between two batches' starts, the query's wall time (start to
stop, with the sink's close) and change events per second; then the ratios held /
baseline. Freshness: for each transaction, the batches between the one carrying its last
change event and the one that committed its rows (from the hold's record of each batch;
0 for the baseline by construction, every row being committed with the batch that
carries it), as mean, max and counts, and in seconds at the held mode's median batch
time. Then the rows held after a batch, the sink's ``transaction_metrics`` after the
last held run (held, completed, forced), the peak RSS of the driver's Python and of the
JVM (one session: both modes; and the highest RSS seen after a batch, per mode), and
the load average at the start and end (a warning when the 1-minute load is above 1.5
at the start: the times are then no measurement).
"""

from __future__ import annotations

import argparse
import bisect
import importlib.util
import json
import multiprocessing
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from streams import jvm_peak_mib  # noqa: E402

import stream_sink as ss  # noqa: E402
from stream_sink.commit.transactions.buffer import TransactionBuffer  # noqa: E402
from stream_sink.commit.transactions.split import Split  # noqa: E402
from stream_sink.metrics.transactions import TransactionMetricsSnapshot  # noqa: E402
from stream_sink.spark import IcebergSink, local_session  # noqa: E402
from stream_sink.spark.cdc import from_debezium  # noqa: E402


def _load(name: str, path: Path) -> Any:
    """A module by path (tests/spark has a ``streams`` module of its own: not on sys.path)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_load("many_tables", REPO / "tests" / "spark" / "many_tables.py")  # tx_events imports it
tx_events = _load("tx_events", REPO / "tests" / "spark" / "tx_events.py")
TABLES: dict[str, str] = tx_events.TABLES
KEYS: dict[str, str] = tx_events.KEYS
SOURCE_SCHEMA: str = tx_events.SOURCE_SCHEMA

MODES = ("baseline", "held")
TX_EVENTS = (2, 10)
"""Change events per transaction (uniform)."""
INSERT, UPDATE = 0.7, 0.9
"""Below INSERT an insert of a new key, below UPDATE an update of a live key, else a delete."""
LOAD_LIMIT = 1.5


# --- the input ---------------------------------------------------------------------------


@dataclass
class Stream:
    """The generated input: per transaction (``tx<n>``), the batch carrying its first and
    last change event and its END; the keys live at the end, per table."""

    batches: int
    changes: int
    first: list[int] = field(default_factory=list)
    last: list[int] = field(default_factory=list)
    end: list[int] = field(default_factory=list)
    live: dict[str, set[Any]] = field(default_factory=dict)

    @property
    def transactions(self) -> int:
        return len(self.last)

    def fractions(self) -> tuple[float, float, float]:
        """Transactions cut by a boundary, with END after, and with END before their last
        change event's batch."""
        n = self.transactions
        cut = sum(f != la for f, la in zip(self.first, self.last, strict=True))
        late = sum(e > la for e, la in zip(self.end, self.last, strict=True))
        early = sum(e < la for e, la in zip(self.end, self.last, strict=True))
        return cut / n, late / n, early / n


def _image(table: str, key: int, version: int) -> dict[str, Any]:
    if table == "inv.customers":
        return {"id": key, "name": f"c{key}v{version}"}
    if table == "inv.orders":
        return {"order_id": key, "customer": key // 3, "amount": key % 1000 / 4 + version}
    return {"sku": f"s{key}", "qty": version}


def _change(
    table: str, key: int, op: str, version: int, tx: str, lsn: int, order: tuple[int, int]
) -> str:
    """One change event as a JSON line (Kafka key and value), as tx_events writes them."""
    db, name = table.split(".")
    after = None if op == "d" else _image(table, key, version)
    before = _image(table, key, version - 1) if op == "u" else None
    if op == "d":
        before = _image(table, key, version)
    value = {
        "op": op,
        "before": before,
        "after": after,
        "source": {"db": db, "table": name, "lsn": lsn},
        "transaction": {"id": tx, "total_order": order[0], "data_collection_order": order[1]},
    }
    image = after or before
    assert image is not None
    event = {"key": json.dumps({KEYS[table]: image[KEYS[table]]}), "value": json.dumps(value)}
    return json.dumps(event) + "\n"


class _Files:
    """The batch files of both inputs, opened when first written, closed once no topic
    writes to them any more."""

    def __init__(self, held: Path, plain: Path) -> None:
        held.mkdir(parents=True)
        plain.mkdir(parents=True)
        self.dirs = (held, plain)
        self.open: dict[int, tuple[IO[str], IO[str]]] = {}

    def write(self, batch: int, line: str, *, end: bool = False) -> None:
        if batch not in self.open:
            self.open[batch] = (
                open(self.dirs[0] / f"batch-{batch:05d}.json", "w"),  # noqa: SIM115
                open(self.dirs[1] / f"batch-{batch:05d}.json", "w"),  # noqa: SIM115
            )
        held, plain = self.open[batch]
        held.write(line)
        if not end:
            plain.write(line)

    def close_before(self, batch: int) -> None:
        for b in [b for b in self.open if b < batch]:
            for f in self.open.pop(b):
                f.close()

    def finish(self, batches: int) -> None:
        """Close every file; modification times in batch order (Spark's file order)."""
        self.close_before(batches)
        base = time.time() - 10_000
        for d in self.dirs:
            for b in range(batches):
                path = d / f"batch-{b:05d}.json"
                path.touch()
                os.utime(path, (base + b, base + b))


def generate(root: Path, batches: int, events: int, cut: float, lag: float, seed: int) -> Stream:
    """Write ``root/held`` (change and END events) and ``root/plain`` (change events only),
    ``batches`` files of about ``events`` change events each (see module)."""
    rng = random.Random(seed)
    tables = list(TABLES)
    nominal = [j * events for j in range(1, batches)]
    spread = round(2 * cut * events)
    ends = {t: [b + rng.randint(0, spread) for b in nominal] for t in tables}
    tx_ends = [b - round(lag * events) for b in nominal]
    files = _Files(root / "held", root / "plain")
    stream = Stream(batches, 0)
    live: dict[str, list[int]] = {t: [] for t in tables}
    slot: dict[str, dict[int, int]] = {t: {} for t in tables}
    version: dict[str, dict[int, int]] = {t: {} for t in tables}
    fresh = dict.fromkeys(tables, 0)
    position = 0
    while position < batches * events:
        tx = f"tx{stream.transactions}"
        counts: Counter[str] = Counter()
        start = rng.randrange(len(tables))
        batches_of_tx = []
        for i in range(rng.randint(*TX_EVENTS)):
            table = tables[(start + i) % len(tables)]
            keys, draw = live[table], rng.random()
            if draw < INSERT or not keys:
                op, key = "c", fresh[table]
                fresh[table] += 1
                slot[table][key] = len(keys)
                keys.append(key)
                version[table][key] = 0
            else:
                key = keys[rng.randrange(len(keys))]
                if draw < UPDATE:
                    op = "u"
                    version[table][key] += 1
                else:
                    op = "d"
                    moved = keys[-1]
                    keys[slot[table][key]] = moved
                    slot[table][moved] = slot[table][key]
                    keys.pop()
                    del slot[table][key]
            batch = bisect.bisect_right(ends[table], position)
            order = (i + 1, counts[table] + 1)
            line = _change(table, key, op, version[table][key], tx, position + 1, order)
            files.write(batch, line)
            batches_of_tx.append(batch)
            counts[table] += 1
            position += 1
        end_batch = bisect.bisect_right(tx_ends, position - 1)
        files.write(end_batch, json.dumps(tx_events.end_event(tx, dict(counts))) + "\n", end=True)
        stream.first.append(min(batches_of_tx))
        stream.last.append(max(batches_of_tx))
        stream.end.append(end_batch)
        files.close_before(min(bisect.bisect_right(e, position) for e in [*ends.values(), tx_ends]))
    files.finish(batches)
    stream.changes = position
    stream.live = {
        t: {f"s{k}" for k in live[t]} if KEYS[t] == "sku" else set(live[t]) for t in tables
    }
    return stream


def generated(root: Path, batches: int, events: int, cut: float, lag: float, seed: int) -> Stream:
    """:func:`generate` in a child process: its memory is no part of the driver's peak."""
    with multiprocessing.get_context("fork").Pool(1) as pool:
        stream: Stream = pool.apply(generate, (root, batches, events, cut, lag, seed))
    return stream


# --- the runs ----------------------------------------------------------------------------


COMMITTED: dict[int, tuple[str, ...]] = {}
"""The transactions each batch of the held run under way committed (complete or forced
out), as the hold records them."""
_record = TransactionBuffer.record


def _recording(self: TransactionBuffer, batch_id: int, split: Split) -> None:
    _record(self, batch_id, split)
    COMMITTED[batch_id] = (*split.completed, *(f.id for f in split.forced))


TransactionBuffer.record = _recording  # type: ignore[method-assign]


@dataclass
class Run:
    mode: str
    seconds: float
    starts: list[float]
    in_batch: list[float]
    held_rows: list[int]
    visible: dict[int, int]
    """Transaction number -> the batch that committed it (held mode)."""
    metrics: TransactionMetricsSnapshot | None
    python_mib: float
    jvm_mib: float

    def median_batch_s(self) -> float:
        return statistics.median(self.in_batch)

    def median_interval_s(self) -> float:
        gaps = [b - a for a, b in zip(self.starts, self.starts[1:], strict=False)]
        return statistics.median(gaps) if gaps else 0.0


def _rss_mib(pid: int | str) -> float:
    """Resident memory now (VmRSS) of process ``pid``; 0 when it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


def _jvm_pid(spark: Any) -> int | str:
    try:
        return int(spark.sparkContext._gateway.proc.pid)
    except AttributeError:
        return "none"


def run(spark: Any, source: Path, work: Path, mode: str, stream: Stream) -> Run:
    """Drain ``source`` into a new routed sink under ``work``; check the final tables."""
    held = mode == "held"
    catalog = ss.load_catalog(
        f"hold_{work.name.replace('-', '_')}",
        type="sql",
        uri=f"sqlite:///{work}/catalog.db",
        warehouse=str(work / "warehouse"),
    )
    sink = IcebergSink(
        catalog=catalog,
        table_column="_table",
        namespaces=["inv", "shop"],
        create_tables=True,
        mode="upsert",
        row_kind_column="_row_kind",
        order_by="_cdc_order",
        checkpoint_location=str(work / "chk"),
        state_dir=str(work / "state"),
        transactions="debezium" if held else None,
    )
    jvm = _jvm_pid(spark)
    starts: list[float] = []
    in_batch: list[float] = []
    held_rows: list[int] = []
    peaks = [0.0, 0.0]
    COMMITTED.clear()

    def foreach(df: Any, batch_id: int) -> None:
        started = time.perf_counter()
        starts.append(started)
        changes = from_debezium(
            df, row_schema=TABLES, table_column="_table", key_column="key", transactions=held
        )
        sink.foreach_batch(changes, batch_id)
        in_batch.append(time.perf_counter() - started)
        m = sink.transaction_metrics
        if m is not None:
            held_rows.append(m.held_rows)
        peaks[0] = max(peaks[0], _rss_mib("self"))
        peaks[1] = max(peaks[1], _rss_mib(jvm))

    df = spark.readStream.schema(SOURCE_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    started = time.perf_counter()
    try:
        q = (
            df.writeStream.foreachBatch(foreach)
            .option("checkpointLocation", sink.spark_checkpoint_location)
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
    finally:
        sink.close()
    seconds = time.perf_counter() - started
    if len(in_batch) != stream.batches:
        raise SystemExit(f"{mode}: {len(in_batch)} micro-batches, expected {stream.batches}")
    for table, key in KEYS.items():
        got = catalog.load_table(table).scan().to_arrow().column(key).to_pylist()
        if len(got) != len(stream.live[table]) or set(got) != stream.live[table]:
            raise SystemExit(
                f"{mode}: {table} holds {len(got):,} rows ({len(set(got)):,} keys), "
                f"expected the {len(stream.live[table]):,} live keys"
            )
    visible = {int(tx[2:]): b for b, txs in COMMITTED.items() for tx in txs}
    if held and len(visible) != stream.transactions:
        raise SystemExit(
            f"held: {len(visible):,} transactions committed, expected {stream.transactions:,}"
        )
    metrics = sink.transaction_metrics
    return Run(mode, seconds, starts, in_batch, held_rows, visible, metrics, *peaks)


def run_rounds(spark: Any, root: Path, stream: Stream, rounds: int) -> dict[str, list[Run]]:
    runs: dict[str, list[Run]] = {m: [] for m in MODES}
    for r in range(rounds):
        for mode in MODES if r % 2 == 0 else MODES[::-1]:
            work = root / "work" / f"{mode}-{r + 1}"
            one = run(spark, root / "input" / _input(mode), work, mode, stream)
            shutil.rmtree(work, ignore_errors=True)
            runs[mode].append(one)
            print(
                f"round {r + 1} {mode:8s} {one.seconds:7.2f} s "
                f"{stream.changes / one.seconds:9,.0f} rows/s  "
                f"batch median {one.median_batch_s() * 1000:6,.0f} ms  "
                f"interval {one.median_interval_s() * 1000:6,.0f} ms",
                flush=True,
            )
    return runs


def _input(mode: str) -> str:
    return "held" if mode == "held" else "plain"


# --- the report --------------------------------------------------------------------------


def report(runs: dict[str, list[Run]], stream: Stream) -> None:
    print(f"medians over {len(runs['held'])} interleaved rounds:")
    wall = {m: statistics.median(r.seconds for r in rs) for m, rs in runs.items()}
    batch = {m: statistics.median(r.median_batch_s() for r in rs) for m, rs in runs.items()}
    for mode, rs in runs.items():
        interval = statistics.median(r.median_interval_s() for r in rs)
        print(
            f"  {mode:8s} {wall[mode]:7.2f} s {stream.changes / wall[mode]:9,.0f} rows/s  "
            f"batch median {batch[mode] * 1000:6,.0f} ms  interval {interval * 1000:6,.0f} ms"
        )
    paired = statistics.median(
        h.seconds / b.seconds for h, b in zip(runs["held"], runs["baseline"], strict=True)
    )
    print(
        f"  held / baseline: batch time {batch['held'] / batch['baseline']:.2f}x, wall time "
        f"{wall['held'] / wall['baseline']:.2f}x (median of per-round ratios {paired:.2f}x), "
        f"rows/s {wall['baseline'] / wall['held']:.2f}x"
    )

    last = runs["held"][-1]
    # a transaction forced out before its last event: its late rows commit as they come
    extra = [max(0, last.visible[n] - stream.last[n]) for n in range(stream.transactions)]
    if any(r.visible != last.visible for r in runs["held"]):
        print("  note: the held runs did not all commit the same transactions per batch")
    spread = Counter(extra)
    later = stream.transactions - spread[0]
    mean, most = statistics.fmean(extra), max(extra)
    print(
        f"freshness (held; the baseline commits every row with its batch: 0 by construction): "
        f"{later:,} of {stream.transactions:,} transactions ({later / stream.transactions:.1%}) "
        f"committed after the batch of their last change event; extra batches mean "
        f"{mean:.3f}, max {most} ("
        + ", ".join(f"{k}: {v:,}" for k, v in sorted(spread.items()))
        + f"); at the held median batch time {batch['held']:.2f} s: mean "
        f"{mean * batch['held']:.3f} s, max {most * batch['held']:.2f} s extra"
    )
    rows = [n for r in runs["held"] for n in r.held_rows]
    print(f"rows held after a batch: median {statistics.median(rows):,.0f}, max {max(rows):,}")
    m = last.metrics
    if m is not None:
        print(
            f"transaction_metrics after the last held run: held {m.held_transactions} "
            f"({m.held_rows} rows), completed {m.completed_transactions:,}, "
            f"forced {m.forced_transactions}"
        )


def main(batches: int, events: int, rounds: int, cut: float, lag: float, seed: int) -> None:
    if not (0 <= cut < 0.25 and 0 <= lag < 0.5 and batches >= 2 and rounds >= 1):
        raise SystemExit("need batches >= 2, rounds >= 1, 0 <= cut < 0.25, 0 <= lag < 0.5")
    load = os.getloadavg()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in load)}", flush=True)
    if load[0] > LOAD_LIMIT:
        warning = (
            f"WARNING: 1-minute load average {load[0]:.2f} > {LOAD_LIMIT} at start: the "
            "machine is busy; the times below are no measurement, do not record them"
        )
        print(f"{'!' * 88}\n{warning}\n{'!' * 88}", flush=True)
        print(warning, file=sys.stderr, flush=True)
    root = Path(tempfile.mkdtemp(prefix="bench-transaction-hold-"))
    try:
        started = time.perf_counter()
        stream = generated(root / "input", batches, events, cut, lag, seed)
        warm = generated(root / "warm-input", 2, min(events, 1_000), cut, lag, seed + 1)
        cut_f, late_f, early_f = stream.fractions()
        print(
            f"{batches} micro-batches, {stream.changes:,} change events "
            f"({stream.changes / batches:,.0f} a batch) in {stream.transactions:,} transactions "
            f"of {TX_EVENTS[0]}-{TX_EVENTS[1]} events over {len(TABLES)} tables: {cut_f:.1%} "
            f"cut by a batch boundary, {late_f:.1%} with their END a batch after their last "
            f"change event, {early_f:.1%} with it before; generated in "
            f"{time.perf_counter() - started:.1f} s",
            flush=True,
        )
        spark = local_session("bench-transaction-hold")
        print(
            f"routed upsert into {len(TABLES)} tables, SQL catalog on SQLite, local[2], "
            f"pyspark {spark.version}",
            flush=True,
        )
        for mode in MODES:  # untimed: JVM code paths, the first tables created
            source = root / "warm-input" / _input(mode)
            run(spark, source, root / "work" / f"warm-{mode}", mode, warm)
        runs = run_rounds(spark, root, stream, rounds)
        report(runs, stream)
        peak = {
            m: (max(r.python_mib for r in rs), max(r.jvm_mib for r in rs)) for m, rs in runs.items()
        }
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"peak RSS (one session, both modes): driver Python {own:,.0f} MiB, JVM "
            f"{jvm_peak_mib(spark):,.0f} MiB; highest after a batch: "
            + ", ".join(f"{m} Python {p:,.0f} / JVM {j:,.0f} MiB" for m, (p, j) in peak.items())
        )
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    after = os.getloadavg()
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in after)}")
    if load[0] > LOAD_LIMIT:
        print(f"(started under load {load[0]:.2f} > {LOAD_LIMIT}: not a measurement)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="What holding source transactions costs.")
    ap.add_argument("batches", nargs="?", type=int, default=20, help="micro-batches")
    ap.add_argument("events", nargs="?", type=int, default=20_000, help="change events a batch")
    ap.add_argument("rounds", nargs="?", type=int, default=3, help="interleaved rounds")
    ap.add_argument(
        "--cut", type=float, default=0.05, help="about the fraction of transactions cut"
    )
    ap.add_argument(
        "--lag", type=float, default=0.05, help="fraction of ENDs a batch after their events"
    )
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    main(a.batches, a.events, a.rounds, a.cut, a.lag, a.seed)

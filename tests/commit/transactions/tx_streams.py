"""Made-up Debezium streams for the transaction hold's tests: transactions over several
collections, each collection's events on its own topic in commit order, END events on
the transaction topic, cut into micro-batches at random points of every topic."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pyarrow as pa

from stream_sink.commit.transactions.markers import TransactionMarker

COLLECTIONS = ("public.orders", "public.lines", "public.stock")

SCHEMA = pa.schema(
    [
        ("seq", pa.int64()),
        ("_transaction_id", pa.string()),
        ("_data_collection", pa.string()),
        ("key", pa.int64()),
        ("_cdc_order", pa.int64()),
    ]
)


@dataclass(frozen=True)
class Event:
    seq: int
    tx: str | None
    collection: str
    key: int


def rows(events: list[Event]) -> pa.Table:
    return pa.table(
        {
            "seq": [e.seq for e in events],
            "_transaction_id": [e.tx for e in events],
            "_data_collection": [e.collection for e in events],
            "key": [e.key for e in events],
            "_cdc_order": [e.seq for e in events],
        },
        schema=SCHEMA,
    )


def end(tx: str, counts: dict[str, int]) -> TransactionMarker:
    return TransactionMarker("END", tx, sum(counts.values()), counts)


@dataclass
class Stream:
    """Per topic the events in order; ``ends`` the transaction topic."""

    topics: dict[str, list[Event]] = field(default_factory=dict)
    ends: list[TransactionMarker] = field(default_factory=list)
    tx_of: dict[int, str | None] = field(default_factory=dict)


def make_stream(rng: random.Random, transactions: int, snapshot_rows: int = 3) -> Stream:
    """Snapshot reads (no transaction) first, then ``transactions`` in commit order, each
    touching 1 to 3 collections and a few of 4 keys each."""
    stream = Stream({c: [] for c in COLLECTIONS})
    seq = 0
    for _ in range(snapshot_rows):
        c = rng.choice(COLLECTIONS)
        stream.topics[c].append(Event(seq, None, c, rng.randrange(4)))
        stream.tx_of[seq] = None
        seq += 1
    for t in range(transactions):
        tx = f"{500 + t}:{1000 * t}"
        counts: dict[str, int] = {}
        for _ in range(rng.randint(1, 5)):
            c = rng.choice(COLLECTIONS)
            stream.topics[c].append(Event(seq, tx, c, rng.randrange(4)))
            stream.tx_of[seq] = tx
            counts[c] = counts.get(c, 0) + 1
            seq += 1
        stream.ends.append(end(tx, counts))
    return stream


def cut(rng: random.Random, stream: Stream, batches: int) -> list[tuple[list[Event], list]]:
    """The stream as ``batches`` micro-batches (then one per topic's rest): each batch
    reads a random prefix of what is left of every topic, topics in random order."""
    left = {c: list(es) for c, es in stream.topics.items()}
    ends = list(stream.ends)
    out = []
    for i in range(batches + 1):
        events: list[Event] = []
        names = list(left)
        rng.shuffle(names)
        for c in names:
            n = len(left[c]) if i == batches else rng.randint(0, len(left[c]))
            events.extend(left[c][:n])
            del left[c][:n]
        n = len(ends) if i == batches else rng.randint(0, len(ends))
        out.append((events, ends[:n]))
        del ends[:n]
    return out


def check_committed(
    stream: Stream,
    committed: list[list[int]],
    forced_out: set[str] = frozenset(),  # type: ignore[assignment]
) -> None:
    """Every row once; a transaction's rows in one batch (but those ``forced_out``,
    whose events may arrive after the bound forced them); each key's rows in order."""
    every = [s for batch in committed for s in batch]
    assert sorted(every) == sorted(stream.tx_of)
    batch_of: dict[str, set[int]] = {}
    for i, batch in enumerate(committed):
        for s in batch:
            tx = stream.tx_of[s]
            if tx is not None:
                batch_of.setdefault(tx, set()).add(i)
    assert all(len(b) == 1 for tx, b in batch_of.items() if tx not in forced_out), batch_of
    key_of = {e.seq: (e.collection, e.key) for es in stream.topics.values() for e in es}
    last: dict[tuple[str, int], int] = {}
    for s in every:
        assert last.get(key_of[s], -1) < s
        last[key_of[s]] = s

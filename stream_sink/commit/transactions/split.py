"""One micro-batch's change rows split into what commits now and what waits for the rest
of its source transaction (pure: no I/O, no clock, no logging).

Input: the batch's change rows (an Arrow table with a transaction id column, null for
rows read outside a transaction, and a data collection column holding Debezium's
``data_collection`` name, e.g. ``public.orders``), the END events seen in the batch,
and the hold after the previous batch. The held rows are prepended to the batch's, so
every row below is in arrival order.

Rules:

- A transaction is *complete* when its END has been seen (in this batch or held from an
  earlier one: the transaction topic is not ordered against the data topics, so an END
  may come first) and, for every collection END lists, the events seen (held plus this
  batch) reach END's ``event_count``. More than END counts is taken as complete: the
  connector delivers at least once and may send an event twice. An event of a
  collection END does not list is an error (the collection column does not hold
  Debezium's names).
- Rows commit now when their transaction is complete, when they have none (snapshot
  reads carry no transaction block), when their transaction is forced out by the
  :class:`~.bound.HoldBound`, or when it was committed already (its id among the
  recently completed): a late event of a forced-out transaction or one the connector
  sends again after its restart is committed with the batch that brings it, never held,
  since the END it would wait for was used already (a replayed END is ignored). Spark's
  own replay of a batch after a crash never counts twice: the store hands the replay the
  hold from before that batch (:mod:`.store`).
- Every other row is held, all of a transaction's rows together.
- With a ``key`` column, a key's changes stay in arrival order across transactions: a
  row behind a held row of the same (collection, key) is held too, and a transaction
  with such a row is held whole (until the one ahead of it completes); forcing a
  transaction out forces the held transactions ahead of it on a shared key as well.

Invariants: the committed rows and the new hold's rows partition the held rows plus the
batch's, each in arrival order (nothing lost, nothing twice); a transaction's rows are
all committed in one batch unless forced out.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from stream_sink.exceptions import TransactionMetadataError

from .bound import ForcedTransaction, HoldBound
from .held import HeldTransactions, OpenTransaction
from .markers import TransactionMarker, where

REMEMBER_COMPLETED = 10_000
"""How many committed transaction ids the hold remembers (for late and repeated events)."""


@dataclass(frozen=True)
class TransactionColumns:
    """The columns the split reads; ``key`` (e.g. the Kafka message key) keeps each key's
    changes in order across transactions (None: no per-key rule)."""

    transaction: str = "_transaction_id"
    collection: str = "_data_collection"
    key: str | None = None
    event: str | None = None
    """A boolean column: the row is its event's first (an update arrives as two rows,
    ``-U`` and ``+U``, of one event, and END counts events); None: every row is one
    event."""


@dataclass(frozen=True)
class Split:
    """What one batch commits, the hold after it, and the transactions it completed and
    forced out."""

    commit: pa.Table
    held: HeldTransactions
    completed: tuple[str, ...]
    forced: tuple[ForcedTransaction, ...]


@dataclass(frozen=True)
class _Seen:
    txs: list[str | None]
    keys: Sequence[Hashable | None]
    counts: dict[str, Counter[str]]


def split_batch(
    rows: pa.Table,
    ends: Iterable[TransactionMarker],
    held: HeldTransactions,
    *,
    batch_id: int,
    now_ms: int,
    bound: HoldBound,
    columns: TransactionColumns = TransactionColumns(),
    remember: int = REMEMBER_COMPLETED,
) -> Split:
    """Split ``rows`` of ``batch_id`` (decided at ``now_ms``) by the rules above."""
    _check_ids(rows, columns)
    done = set(held.completed)
    every = _concat(held.rows, rows)
    seen = _seen(every, columns, done)
    end_of = _ends(held, ends, done)
    known = {
        tx: held.open.get(tx) or OpenTransaction(tx, batch_id, now_ms)
        for tx in seen.counts.keys() | end_of.keys()
    }
    complete = {tx for tx in known if _complete(tx, end_of.get(tx), seen.counts.get(tx))}
    open_ = set(known) - complete
    over = {tx for tx in open_ if tx in seen.counts and bound.exceeded(known[tx], batch_id, now_ms)}
    forced = _force_ahead(over, open_, seen)
    mask, waiting = _hold(seen, open_ - forced)
    committed = tuple(sorted((complete | forced) - waiting))
    keep = {
        tx: OpenTransaction(t.id, t.first_batch, t.first_ms, end_of.get(tx))
        for tx, t in known.items()
        if tx in waiting
        or (tx not in seen.counts and tx in open_ and not bound.exceeded(t, batch_id, now_ms))
    }
    held_rows = every.filter(pa.array(mask, pa.bool_()))
    new_hold = HeldTransactions(
        batch_id,
        now_ms,
        held_rows if held_rows.num_rows else None,
        keep,
        (*held.completed, *committed)[-remember:] if remember else (),
    )
    report = tuple(
        ForcedTransaction(
            tx,
            known[tx].first_batch,
            dict(seen.counts[tx]),
            None if tx not in end_of else dict(end_of[tx].collections or {}),
        )
        for tx in sorted(forced - waiting)
    )
    commit = every.filter(pc.invert(pa.array(mask, pa.bool_())))
    return Split(commit, new_hold, tuple(sorted(complete - waiting)), report)


def _check_ids(rows: pa.Table, columns: TransactionColumns) -> None:
    """An empty transaction id is a block without its id: refused, naming the row."""
    for name in (columns.transaction, columns.collection, columns.key, columns.event):
        if name is not None and name not in rows.column_names:
            raise TransactionMetadataError(
                f"the change rows have no column {name!r} (columns: {rows.column_names})"
            )
    ids = rows.column(columns.transaction).to_pylist()
    for i, tx in enumerate(ids):
        if tx is not None and not tx:
            at = where(
                _cell(rows, "topic", i), _cell(rows, "partition", i), _cell(rows, "offset", i)
            )
            raise TransactionMetadataError(
                f"{at}: the change event's transaction block has no id; set "
                "provide.transaction.metadata=true on the Debezium connector and keep the "
                "transaction field through any transform"
            )


def _cell(rows: pa.Table, name: str, i: int) -> Any:
    return rows.column(name)[i].as_py() if name in rows.column_names else None


def _concat(held: pa.Table | None, rows: pa.Table) -> pa.Table:
    if held is None or held.num_rows == 0:
        return rows
    return pa.concat_tables([held, rows], promote_options="default")


def _seen(every: pa.Table, columns: TransactionColumns, done: set[str]) -> _Seen:
    txs = every.column(columns.transaction).to_pylist()
    colls = every.column(columns.collection).to_pylist()
    raw = every.column(columns.key).to_pylist() if columns.key else [None] * len(txs)
    keys = [None if k is None else (c, _hashable(k)) for c, k in zip(colls, raw, strict=True)]
    events = every.column(columns.event).to_pylist() if columns.event else [True] * len(txs)
    counts: dict[str, Counter[str]] = {}
    for tx, coll, first in zip(txs, colls, events, strict=True):
        if tx is not None and tx not in done:
            seen = counts.setdefault(tx, Counter())
            if first:
                seen[coll] += 1
    return _Seen(txs, keys, counts)


def _hashable(value: object) -> Hashable:
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, default=str)
    return value  # type: ignore[return-value]


def _ends(
    held: HeldTransactions, ends: Iterable[TransactionMarker], done: set[str]
) -> dict[str, TransactionMarker]:
    out = {tx: t.end for tx, t in held.open.items() if t.end is not None}
    for marker in ends:
        if marker.status == "END" and marker.id not in done:
            out[marker.id] = marker
    return out


def _complete(tx: str, end: TransactionMarker | None, seen: Counter[str] | None) -> bool:
    if end is None:
        return False
    expected = end.collections or {}
    extra = sorted(set(seen or {}) - set(expected))
    if extra:
        raise TransactionMetadataError(
            f"transaction {tx}: events of collection(s) {extra} but its END lists only "
            f"{sorted(expected)}; the collection column must hold Debezium's "
            "data_collection name (source schema.table, or db.table for MySQL)"
        )
    return all((seen or Counter())[c] >= n for c, n in expected.items())


def _by_key(seen: _Seen) -> dict[Hashable, list[str | None]]:
    out: dict[Hashable, list[str | None]] = {}
    for tx, key in zip(seen.txs, seen.keys, strict=True):
        if key is not None:
            out.setdefault(key, []).append(tx)
    return out


def _force_ahead(over: set[str], open_: set[str], seen: _Seen) -> set[str]:
    """``over`` plus every open transaction ahead of a forced one on a shared key."""
    forced = set(over)
    chains = _by_key(seen).values()
    changed = bool(forced)
    while changed:
        changed = False
        for chain in chains:
            last = max((i for i, tx in enumerate(chain) if tx in forced), default=-1)
            ahead = {tx for tx in chain[:last] if tx in open_ and tx not in forced}
            if ahead:
                forced |= ahead  # type: ignore[arg-type]
                changed = True
    return forced


def _hold(seen: _Seen, waiting: set[str]) -> tuple[list[bool], set[str]]:
    """Which rows are held (and the transactions held whole): ``waiting``'s, and by the
    per-key rule every row behind a held one, pulling in its transaction whole."""
    held_txs = set(waiting)
    while True:
        mask, pulled = _one_pass(seen.txs, seen.keys, held_txs, seen.counts.keys())
        if not pulled:
            return mask, held_txs
        held_txs |= pulled


def _one_pass(
    txs: Sequence[str | None],
    keys: Sequence[Hashable | None],
    held_txs: set[str],
    counted: Iterable[str],
) -> tuple[list[bool], set[str]]:
    countable = set(counted)
    blocked: set[Hashable] = set()
    pulled: set[str] = set()
    mask = []
    for tx, key in zip(txs, keys, strict=True):
        hold = tx in held_txs or (key is not None and key in blocked)
        if hold and key is not None:
            blocked.add(key)
        if hold and tx is not None and tx in countable and tx not in held_txs:
            pulled.add(tx)
        mask.append(hold)
    return mask, pulled

"""Tests stream_sink.commit.transactions.split: complete transactions commit, open ones are
held whole, END before its events, late and repeated events, the per-key rule, the
bound, and random interleavings of many transactions over several collections."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from tx_streams import Event, check_committed, cut, end, make_stream, rows

from stream_sink.commit.transactions.bound import HoldBound
from stream_sink.commit.transactions.held import HeldTransactions
from stream_sink.commit.transactions.split import Split, TransactionColumns, split_batch
from stream_sink.exceptions import TransactionMetadataError

ORD, LIN = "public.orders", "public.lines"
KEYED = TransactionColumns(key="key")


def run(events, ends, held=None, batch_id=0, bound=None, columns=KEYED, now_ms=0) -> Split:
    return split_batch(
        rows(events),
        ends,
        held or HeldTransactions(),
        batch_id=batch_id,
        now_ms=now_ms,
        bound=bound or HoldBound(batches=100),
        columns=columns,
    )


def seqs(table: pa.Table) -> list[int]:
    return table.column("seq").to_pylist()


def test_a_complete_transaction_commits_and_an_open_one_is_held() -> None:
    events = [Event(0, "a", ORD, 1), Event(1, "a", LIN, 1), Event(2, "b", ORD, 2)]
    split = run(events, [end("a", {ORD: 1, LIN: 1})])
    assert seqs(split.commit) == [0, 1]
    assert seqs(split.held.rows) == [2]
    assert set(split.held.open) == {"b"}
    assert split.completed == ("a",)
    assert split.held.completed == ("a",)


def test_rows_outside_a_transaction_commit_at_once() -> None:
    split = run([Event(0, None, ORD, 1), Event(1, "b", ORD, 2)], [])
    assert seqs(split.commit) == [0]
    assert seqs(split.held.rows) == [1]


def test_an_end_before_its_events_keeps_holding_until_they_arrive() -> None:
    first = run([Event(0, "a", ORD, 1)], [end("a", {ORD: 1, LIN: 1})])
    assert first.commit.num_rows == 0
    assert first.held.open["a"].end is not None
    second = run([Event(1, "a", LIN, 1)], [], held=first.held, batch_id=1)
    assert seqs(second.commit) == [0, 1]
    assert second.held.rows is None
    assert second.held.open == {}


def test_an_end_with_no_events_yet_is_kept_for_them() -> None:
    first = run([], [end("a", {ORD: 1})])
    assert set(first.held.open) == {"a"} and first.held.rows is None
    second = run([Event(0, "a", ORD, 1)], [], held=first.held, batch_id=1)
    assert seqs(second.commit) == [0]


def test_events_of_a_committed_transaction_commit_at_once_and_its_end_again_is_ignored() -> None:
    first = run([Event(0, "a", ORD, 1)], [end("a", {ORD: 1})])
    again = run([Event(0, "a", ORD, 1)], [end("a", {ORD: 1})], held=first.held, batch_id=1)
    assert seqs(again.commit) == [0]
    assert again.held.open == {} and again.completed == ()


def test_more_events_than_end_counts_is_complete() -> None:
    split = run([Event(0, "a", ORD, 1), Event(1, "a", ORD, 1)], [end("a", {ORD: 1})])
    assert seqs(split.commit) == [0, 1]


def test_a_key_behind_a_held_row_waits_with_its_whole_transaction() -> None:
    events = [Event(0, "z", ORD, 1), Event(1, "y", LIN, 7), Event(2, "y", ORD, 1)]
    first = run(events, [end("y", {ORD: 1, LIN: 1})])
    assert first.commit.num_rows == 0
    assert set(first.held.open) == {"y", "z"}
    second = run([Event(3, "z", LIN, 9)], [end("z", {ORD: 1, LIN: 1})], held=first.held, batch_id=1)
    assert seqs(second.commit) == [0, 1, 2, 3]


def test_without_a_key_column_later_transactions_do_not_wait() -> None:
    events = [Event(0, "z", ORD, 1), Event(1, "y", ORD, 1)]
    split = run(events, [end("y", {ORD: 1})], columns=TransactionColumns())
    assert seqs(split.commit) == [1]


def test_the_bound_forces_a_transaction_out_with_those_ahead_of_it_on_a_key() -> None:
    first = run([Event(0, "z", ORD, 1)], [])
    second = run([Event(1, "w", ORD, 1)], [], held=first.held, batch_id=2)
    bound = HoldBound(batches=3)
    third = run([], [], held=second.held, batch_id=3, bound=bound)
    assert [f.id for f in third.forced] == ["z"]
    assert seqs(third.commit) == [0]  # w (first seen in batch 2) still within the bound
    assert third.forced[0].expected is None and third.forced[0].seen == {ORD: 1}
    assert "z" in third.held.completed
    late = run([Event(2, "z", LIN, 5)], [], held=third.held, batch_id=4, bound=bound)
    assert seqs(late.commit) == [2]  # a late event of a forced-out transaction


def test_forcing_one_forces_the_held_one_ahead_of_it_on_a_shared_key() -> None:
    first = run([Event(0, "z", ORD, 1)], [], batch_id=5)
    second = run([Event(1, "w", ORD, 1)], [], held=first.held, batch_id=0)
    # w is older by its first batch than z is: forcing w forces z, which is ahead of it
    held = second.held
    bound = HoldBound(batches=2)
    split = run([], [], held=held, batch_id=2, bound=bound)
    assert {f.id for f in split.forced} == {"w", "z"}
    assert seqs(split.commit) == [0, 1]


def test_the_time_bound() -> None:
    first = run([Event(0, "z", ORD, 1)], [], now_ms=1000)
    bound = HoldBound(batches=None, ms=500)
    assert run([], [], held=first.held, batch_id=1, now_ms=1400, bound=bound).forced == ()
    assert len(run([], [], held=first.held, batch_id=1, now_ms=1500, bound=bound).forced) == 1


def test_a_collection_end_does_not_list_is_refused_with_how_to_fix() -> None:
    with pytest.raises(TransactionMetadataError, match="data_collection name"):
        run([Event(0, "a", "orders", 1)], [end("a", {ORD: 1})])


def test_an_empty_transaction_id_is_refused_naming_its_place() -> None:
    table = rows([Event(0, "", ORD, 1)]).append_column("topic", pa.array(["pg.public.orders"]))
    table = table.append_column("partition", pa.array([0])).append_column("offset", pa.array([42]))
    with pytest.raises(
        TransactionMetadataError, match=r"topic pg\.public\.orders, partition 0, offset 42"
    ):
        split_batch(table, [], HeldTransactions(), batch_id=0, now_ms=0, bound=HoldBound())


def test_a_missing_column_is_refused() -> None:
    with pytest.raises(TransactionMetadataError, match="no column 'tx'"):
        split_batch(
            rows([]),
            [],
            HeldTransactions(),
            batch_id=0,
            now_ms=0,
            bound=HoldBound(),
            columns=TransactionColumns(transaction="tx"),
        )


def test_a_new_column_in_a_later_batch_joins_the_held_rows() -> None:
    first = run([Event(0, "a", ORD, 1)], [])
    wider = rows([Event(1, "a", LIN, 1)]).append_column("extra", pa.array(["x"]))
    split = split_batch(
        wider,
        [end("a", {ORD: 1, LIN: 1})],
        first.held,
        batch_id=1,
        now_ms=0,
        bound=HoldBound(),
        columns=KEYED,
    )
    assert split.commit.column("extra").to_pylist() == [None, "x"]


@pytest.mark.parametrize("seed", range(40))
def test_random_interleavings_commit_every_row_once_each_transaction_whole(seed: int) -> None:
    rng = random.Random(seed)
    stream = make_stream(rng, transactions=rng.randint(1, 12))
    held = HeldTransactions()
    committed: list[list[int]] = []
    for batch_id, (events, ends) in enumerate(cut(rng, stream, rng.randint(1, 6))):
        split = run(events, ends, held=held, batch_id=batch_id)
        held = split.held
        committed.append(seqs(split.commit))
        assert split.forced == ()
    check_committed(stream, committed)
    assert held.rows is None and held.open == {}


@pytest.mark.parametrize("seed", range(40))
def test_lost_ends_are_forced_out_by_the_bound_and_every_row_still_lands_once(
    seed: int,
) -> None:
    rng = random.Random(seed)
    stream = make_stream(rng, transactions=rng.randint(2, 12))
    lost = {m.id for m in stream.ends if rng.random() < 0.3}
    stream.ends = [m for m in stream.ends if m.id not in lost]
    held, committed, forced = HeldTransactions(), [], set()
    batches = cut(rng, stream, rng.randint(1, 6)) + [([], [])] * 4  # let the bound run out
    for batch_id, (events, ends) in enumerate(batches):
        split = run(events, ends, held=held, batch_id=batch_id, bound=HoldBound(batches=2))
        held = split.held
        committed.append(seqs(split.commit))
        forced |= {f.id for f in split.forced}
    with_rows = {e.tx for es in stream.topics.values() for e in es if e.tx is not None}
    assert lost & with_rows <= forced  # a slow one may be forced too: the bound is a bound
    assert held.rows is None and held.open == {}
    check_committed(stream, committed, forced_out=forced)


def test_an_update_is_one_event_though_it_arrives_as_two_rows() -> None:
    """``from_debezium`` makes an update two rows (``-U``, ``+U``) of one event, and END
    counts events: only each event's first row counts. Counting rows, transaction ``a``
    (END: two events of lines) would look complete with one update of the two."""
    events = [Event(0, "a", ORD, 1), Event(1, "a", LIN, 1), Event(2, "a", LIN, 1)]
    table = rows(events).append_column("first", pa.array([True, True, False]))
    columns = TransactionColumns(key="key", event="first")
    ends = [end("a", {ORD: 1, LIN: 2})]
    split = split_batch(
        table, ends, HeldTransactions(), batch_id=0, now_ms=0, bound=HoldBound(100), columns=columns
    )
    assert split.commit.num_rows == 0 and seqs(split.held.rows) == [0, 1, 2]
    more = pa.table(
        {**{c: rows([Event(3, "a", LIN, 2)]).column(c) for c in table.column_names[:-1]},
         "first": [True]}
    )  # fmt: skip
    again = split_batch(
        more, [], split.held, batch_id=1, now_ms=0, bound=HoldBound(100), columns=columns
    )
    assert seqs(again.commit) == [0, 1, 2, 3] and again.completed == ("a",)

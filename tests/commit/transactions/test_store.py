"""Tests stream_sink.commit.transactions.store: one version of the hold per batch, the
newest below a batch kept for its re-run, older ones dropped in the same write."""

from __future__ import annotations

import os

from stream_sink.commit.transactions.held import HeldTransactions
from stream_sink.commit.transactions.store import HoldStore
from stream_sink.state import open_state_backend


def test_versions_and_replays(backend: str, tmp_path: str) -> None:
    path = os.path.join(str(tmp_path), "sink")
    with open_state_backend(backend, path) as state:  # type: ignore[arg-type]
        store = HoldStore(state)
        assert store.before(0) == HeldTransactions() and store.decided_at(0) is None
        for b in (0, 1, 3):
            store.save(b, HeldTransactions(b, 100 + b))
        assert store.versions() == [1, 3]
        assert store.before(3).batch_id == 1  # a re-run of batch 3 starts from batch 1's
        assert store.before(4).batch_id == 3
        assert store.decided_at(3) == 103
        store.save(2, HeldTransactions(2, 102))  # a rewound query: later versions go
        assert store.versions() == [1, 2]
    with open_state_backend(backend, path) as state:  # type: ignore[arg-type]
        assert HoldStore(state).latest() == HeldTransactions(2, 102)

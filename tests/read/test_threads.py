"""Tests stream_sink.read.threads: a scan's decoding threads follow the CPUs this process
may run on, not the host's count."""

from __future__ import annotations

import os

import pytest

from stream_sink.read.threads import usable_cpus


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux's")
def test_the_count_follows_the_process_affinity() -> None:
    allowed = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {min(allowed)})
        assert usable_cpus() == 1
    finally:
        os.sched_setaffinity(0, allowed)
    assert usable_cpus() == len(allowed)


def test_without_affinity_the_host_count_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert usable_cpus() == 2
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert usable_cpus() == 8

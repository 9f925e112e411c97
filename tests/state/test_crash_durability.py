"""A process killed with SIGKILL keeps every acknowledged batch, whole, and no torn one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

from stream_sink.state import OperatorStateBackend

Opener = Callable[..., OperatorStateBackend]


_WRITER = r"""
import sys
from stream_sink.state import StateWriteBatch, open_state_backend

kind, path = sys.argv[1], sys.argv[2]
b = open_state_backend(kind, path)
i = 0
while True:
    batch = StateWriteBatch()
    for part in range(20):
        batch.put(b"b%06d/%02d" % (i, part), b"x" * 200)
    b.write(batch)
    print(i, flush=True)  # acknowledged: write() has returned
    i += 1
"""


def _run_and_kill(kind: str, path: str, min_acked: int) -> int:
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, kind, path],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    last = -1
    deadline = time.monotonic() + 60
    while last < min_acked and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        last = int(line)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert last >= min_acked, f"writer acknowledged only {last} batches"
    return last


def test_killed_writer_loses_no_acknowledged_batch_and_leaves_none_half_applied(
    kind: str, open_backend: Opener, state_dir: str
) -> None:
    acked = _run_and_kill(kind, state_dir, min_acked=30)
    with open_backend() as b:
        counts: dict[bytes, int] = {}
        for key, _ in b.scan(b"b"):
            counts[key[:7]] = counts.get(key[:7], 0) + 1
    batches = sorted(int(k[1:]) for k in counts)
    assert all(n == 20 for n in counts.values()), "a batch was applied in part"
    assert batches == list(range(len(batches))), "batches are not a gap-free prefix"
    assert len(batches) >= acked + 1, f"acknowledged batch {acked} lost"

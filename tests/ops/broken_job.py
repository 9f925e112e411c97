"""A drill job whose committer is broken on purpose: it never finds its watermark.

The demo job runs with the watermark lookups (restore and the check inside each commit)
patched to answer -1, as if nothing had ever been committed. After a kill between the
table commit and the state clean-up, the restarted committer commits the same staged
files again, so the drill must report duplicates. Only this process is patched.
"""

from __future__ import annotations

from typing import Any

from stream_sink.ops.drill.jobs import prepare_demo, run_demo


def _nothing_committed(*args: Any, **kwargs: Any) -> int:
    return -1


def run(**context: Any) -> None:
    import stream_sink.commit.iceberg.table_commit as table_commit
    import stream_sink.commit.iceberg.target as iceberg_target

    iceberg_target.committed_watermark = _nothing_committed  # type: ignore[assignment]
    table_commit.watermark_from = _nothing_committed  # type: ignore[assignment]
    prepare_demo(**context)
    run_demo(**context)

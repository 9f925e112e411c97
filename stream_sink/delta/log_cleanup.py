"""Removing commit temporaries a killed writer left in ``_delta_log``.

A local commit writes ``.<version>.json.<uuid>.tmp``, fsyncs it and hard-links it to
``<version>.json`` (:meth:`DeltaLog.write_commit`), then unlinks the temporary. A
writer killed between the write and the unlink leaves the temporary behind: readers
ignore it (no reader lists dot files as versions), but it would stay forever.

After each successful commit the committing writer removes such leftovers, under two
conditions that together keep it from ever touching a temporary a live writer still
needs:

- the name is this writer family's (``.%020d.json.<32 hex>.tmp``, nothing else; also
  the temporaries of a checkpoint and of ``_last_checkpoint``), and its version is at or
  below the version just committed: a live writer holding it can
  only lose the race for that version (its ``link`` fails on the existing name), so its
  temporary will never become a version;
- its modification time is older than ``older_than_s`` (default one hour): a live
  writer holds its temporary only between writing it and linking it (milliseconds), so
  removing it cannot turn that writer's "version taken" (rebase) into "file missing".

Failures only log: a leftover temporary is harmless.
"""

from __future__ import annotations

import logging
import re
import time

import pyarrow.fs as pafs

from .log import DeltaLog

log = logging.getLogger(__name__)

TEMP_NAME = re.compile(r"^\.(\d{20})\.json\.[0-9a-f]{32}\.tmp$")
"""A commit's temporary (``FileIO.put_if_absent``)."""
ATOMIC_TEMP_NAMES = (
    re.compile(r"^(\d{20})\.checkpoint\.parquet\.[0-9a-f]{32}\.tmp$"),
    re.compile(r"^_last_checkpoint\.[0-9a-f]{32}\.tmp$"),
)
"""Temporaries of ``FileIO.write_atomic`` (a checkpoint, ``_last_checkpoint``): a live
writer that lost one only fails its checkpoint, which is logged, never the commit."""
STALE_TEMP_AGE_S = 3600.0
"""Temporaries younger than this are never removed (see module docstring)."""


def stale_temporaries(
    delta_log: DeltaLog, committed: int, *, older_than_s: float = STALE_TEMP_AGE_S
) -> list[str]:
    """Paths of our temporaries (of versions <= ``committed``) older than ``older_than_s``."""
    io = delta_log.io
    if not io.supports_atomic_rename:  # object stores write no temporaries
        return []
    selector = pafs.FileSelector(io.path_of(delta_log.log_dir), allow_not_found=True)
    cutoff_ns = (time.time() - older_than_s) * 1e9
    stale = []
    for info in io.filesystem().get_file_info(selector):
        match = next(
            (m for p in (TEMP_NAME, *ATOMIC_TEMP_NAMES) if (m := p.match(info.base_name))), None
        )
        if match is None or (match.groups() and int(match.group(1)) > committed):
            continue
        if info.mtime_ns is not None and info.mtime_ns < cutoff_ns:
            stale.append(info.path)
    return sorted(stale)


def remove_stale_temporaries(
    delta_log: DeltaLog, committed: int, *, older_than_s: float = STALE_TEMP_AGE_S
) -> list[str]:
    """Remove :func:`stale_temporaries`; returns the removed paths."""
    removed = []
    try:
        paths = stale_temporaries(delta_log, committed, older_than_s=older_than_s)
        fs = delta_log.io.filesystem()
        for path in paths:
            try:
                fs.delete_file(path)
                removed.append(path)
            except FileNotFoundError:  # another writer removed it first
                continue
    except Exception as e:  # cleanup only
        log.warning("Delta table %s: removing stale temporaries failed: %s", delta_log.location, e)
    if removed:
        log.info(
            "Delta table %s: removed %d commit temporaries a killed writer left",
            delta_log.location,
            len(removed),
        )
    return removed

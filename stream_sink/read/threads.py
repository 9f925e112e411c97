"""How many threads a scan may use for Parquet decoding (which releases the GIL)."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """CPUs this process may run on (``os.cpu_count`` counts the host's in containers)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 2

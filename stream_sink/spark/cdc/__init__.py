"""CDC preparation on Spark: Debezium events to a changelog (:mod:`.debezium`), the
control columns that ride along (:mod:`.control_columns`), how rows are spread and
ordered per key (:mod:`.distribution`, :mod:`.ordering`), the guards that stop a batch
whose order is ambiguous or whose keys are null (:mod:`.guard`), and counting ties
(:mod:`.ties`).

Used by every front door and by the shared planning (``spark/plan.py``); imports no
front door. ``from stream_sink.spark.cdc import from_debezium`` is public; the names
load on first use, so executors importing :mod:`.ties` or :mod:`.ordering` pay for
nothing else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stream_sink.spark.cdc.debezium import (
        ORDER_COLUMN,
        ROW_KIND_COLUMN,
        debezium_row_schema,
        from_debezium,
        to_spark_schema,
        union_schema,
    )

__all__ = [
    "ORDER_COLUMN",
    "ROW_KIND_COLUMN",
    "debezium_row_schema",
    "from_debezium",
    "to_spark_schema",
    "union_schema",
]
_EXPORTS = frozenset(__all__)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.debezium"), name)
    globals()[name] = value
    return value

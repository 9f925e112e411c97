"""stream_sink: exactly-once streaming writes from Spark into Apache Iceberg tables."""

from __future__ import annotations

__version__ = "0.1.0"

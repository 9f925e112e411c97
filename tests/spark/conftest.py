"""The Spark tests sit in the folder of the module they test (``cdc/``, ``datasource/``,
``datasource/delta/``, ``foreach_batch/``, ``read/``, or here for a module of
``stream_sink/spark/`` itself); the modules several of them share stay here
(``streams.py``, ``kill_job.py``, ``many_tables.py``, ``cluster.py``, ``test_kill.py``'s
kill jobs). This folder is put on ``sys.path`` so those modules import by their basename
from a test in any of the sub-folders, as the tests' folders have no ``__init__.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

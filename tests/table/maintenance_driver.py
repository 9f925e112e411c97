"""Runs one maintenance operation on Hadoop table ``db.t`` as a subprocess, for the
crash tests: ``python maintenance_driver.py WAREHOUSE rewrite|expire|convert``.
``STREAM_SINK_FAILPOINT`` kills it on the spot."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compaction import commit_compaction, plan_compaction

from stream_sink.catalogs import load_catalog
from stream_sink.failpoints import AFTER_REWRITE_FILES, failpoint

FAR_FUTURE = 2**62


def main(warehouse: str, op: str) -> None:
    table = load_catalog("c", type="hadoop", warehouse=warehouse).load_table("db.t")
    if op == "rewrite":
        plan = plan_compaction(table)
        failpoint(AFTER_REWRITE_FILES)
        commit_compaction(table, plan, use_starting_sequence_number=True)
    elif op == "convert":
        table.maintenance.convert_equality_deletes()
    else:
        table.new_expire_snapshots().expire_older_than(FAR_FUTURE).retain_last(1).commit()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

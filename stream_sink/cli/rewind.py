"""``stream-sink rewind --spark-checkpoint-location DIR --batch N``: Spark runs batch N
again at the query's next start (see :mod:`stream_sink.ops.rewind`); prints each file it
removes (``--dry-run``: only prints them). Stop the query first."""

from __future__ import annotations

import argparse

from stream_sink.io.fileio import FileIO
from stream_sink.ops.rewind import plan_rewind, rewind
from stream_sink.spark.options import resolve_location


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--spark-checkpoint-location",
        required=True,
        metavar="DIR",
        help="the query's checkpointLocation (a sink's spark_checkpoint_location: "
        "<checkpoint_location>/spark)",
    )
    parser.add_argument(
        "--batch", type=int, required=True, help="the batch id Spark is to run again"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print the files it would remove, remove none"
    )


def run_rewind(args: argparse.Namespace) -> int:
    location = resolve_location(args.spark_checkpoint_location)
    io = FileIO.for_location(location, {})
    plan = plan_rewind(location, args.batch, io)
    files = [f for f in plan.files() if io.exists(f)]
    if not args.dry_run:
        rewind(plan, io)
    for f in files:
        print(("would remove " if args.dry_run else "removed ") + f)
    if not args.dry_run:
        print(
            f"the query's next start runs batch {plan.batch_id} again "
            f"({len(plan.commits)} acknowledged batch(es) and {len(plan.offsets)} planned "
            "batch(es) after it forgotten by Spark)"
        )
    return 0

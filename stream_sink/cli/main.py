"""The ``stream-sink`` command."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from stream_sink.exceptions import StreamSinkError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stream-sink",
        description="Exactly-once streaming writes from Spark into Apache Iceberg tables.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the main job on the embedded default")
    demo.add_argument("--warehouse", default="warehouse", help="Hadoop catalog warehouse dir")
    demo.add_argument("--rows", type=int, default=100_000, help="rows to write")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "demo":
            from stream_sink.cli.demo import run_demo

            return run_demo(args.warehouse, args.rows)
    except StreamSinkError as e:
        print(f"stream-sink: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 2


if __name__ == "__main__":
    sys.exit(main())

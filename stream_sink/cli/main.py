"""The ``stream-sink`` command."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from stream_sink.cli.table_commands import add_table_parsers, run_read, run_table
from stream_sink.exceptions import StreamSinkError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stream-sink",
        description="Exactly-once streaming writes from Spark into Apache Iceberg tables.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the main job on the embedded default")
    from stream_sink.cli.demo import add_arguments as add_demo_arguments

    add_demo_arguments(demo)
    add_table_parsers(sub)
    drill = sub.add_parser("drill", help="restart/recovery drill: kill, restart, verify")
    from stream_sink.cli.drill import add_arguments as add_drill_arguments

    add_drill_arguments(drill)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "demo":
            from stream_sink.cli.demo import run_demo_from_args

            return run_demo_from_args(args)
        if args.command == "drill":
            from stream_sink.cli.drill import run_drill_from_args

            return run_drill_from_args(args)
        if args.command == "table":
            return run_table(args)
        if args.command == "read":
            return run_read(args)
    except StreamSinkError as e:
        print(f"stream-sink: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 2


if __name__ == "__main__":
    sys.exit(main())

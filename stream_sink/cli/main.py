"""The ``stream-sink`` command.

Invariants: every option has a help text, and ``--help`` shows its default (see
:class:`HelpFormatter`); errors of the library end the command with one line on stderr
and status 1; a closed stdout pipe ends it quietly.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from stream_sink import __version__
from stream_sink.cli.output import quiet_broken_pipe
from stream_sink.cli.table_commands import add_table_parsers, run_read, run_table
from stream_sink.exceptions import StreamSinkError


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Appends ``(default: X)`` to an option's help unless the default is None/False
    (then the help text itself says what happens) or the text already names it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            default is None
            or default is False
            or default == argparse.SUPPRESS
            or "default" in text
            or not action.option_strings
        ):
            return text
        if isinstance(default, list):
            return f"{text} (default: {', '.join(default) or 'none'})"
        return f"{text} (default: %(default)s)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stream-sink",
        description="Exactly-once streaming writes from Spark into Apache Iceberg (v2, v3) "
        "and Delta Lake tables.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"stream-sink {__version__}",
        help="print the version and exit",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="a Debezium change stream upserted into an Iceberg table through a kill and a "
        "restart, then checked",
        description="Generate a Debezium change stream of an orders table as JSON files,\n"
        "upsert it into the Iceberg table demo.orders with a streaming job, kill the job\n"
        "with SIGKILL mid-batch once about half the batches are committed, restart it\n"
        "from its checkpoint location, then check that the table equals the stream's\n"
        "final state and print its snapshots, totals and timings.",
        formatter_class=HelpFormatter,
    )
    from stream_sink.cli.demo import add_arguments as add_demo_arguments

    add_demo_arguments(demo)
    add_table_parsers(sub, HelpFormatter)
    from stream_sink.cli.drill import add_arguments as add_drill_arguments
    from stream_sink.cli.drill import drill_epilog

    drill = sub.add_parser(
        "drill",
        help="restart/recovery drill: kill, restart, verify",
        formatter_class=HelpFormatter,
        epilog=drill_epilog(),
    )
    add_drill_arguments(drill)
    from stream_sink.cli.status import add_arguments as add_status_arguments

    status = sub.add_parser(
        "status",
        help="a sink's progress: watermark, pending and staged batches, Spark's offsets; "
        "with --table only, the source position each sink's commits recorded",
        formatter_class=HelpFormatter,
    )
    add_status_arguments(status)
    maintain = sub.add_parser(
        "maintain",
        help="compact, convert deletes, expire snapshots, remove orphan files",
        formatter_class=HelpFormatter,
    )
    from stream_sink.cli.maintain import add_arguments as add_maintain_arguments

    add_maintain_arguments(maintain)
    from stream_sink.cli.rewind import add_arguments as add_rewind_arguments

    rewind = sub.add_parser(
        "rewind",
        help="make Spark run a batch again (one a foreachBatch function skipped)",
        formatter_class=HelpFormatter,
    )
    add_rewind_arguments(rewind)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with quiet_broken_pipe():
        try:
            return _run(args)
        except StreamSinkError as e:
            print(f"stream-sink: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
    return 0  # stdout was closed by its reader: nothing more to say


def _run(args: argparse.Namespace) -> int:
    if args.command == "demo":
        from stream_sink.cli.demo import run_demo_from_args

        return run_demo_from_args(args)
    if args.command == "drill":
        from stream_sink.cli.drill import run_drill_from_args

        return run_drill_from_args(args)
    if args.command == "status":
        from stream_sink.cli.status import run_status

        return run_status(args)
    if args.command == "maintain":
        from stream_sink.cli.maintain import run_maintain

        return run_maintain(args)
    if args.command == "rewind":
        from stream_sink.cli.rewind import run_rewind

        return run_rewind(args)
    if args.command == "table":
        return run_table(args)
    if args.command == "read":
        return run_read(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())

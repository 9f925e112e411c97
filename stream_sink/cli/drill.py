"""``stream-sink drill``: options, and the report as a terminal table (and JSON)."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from stream_sink.cli.output import format_table
from stream_sink.cli.table_commands import add_catalog_options, catalog_properties_of
from stream_sink.exceptions import InvalidOptionError
from stream_sink.ops.drill.jobs import DELETE_MODES, DRILL_MODES, TARGETS, JobSpec
from stream_sink.ops.drill.mistakes import mistake_names
from stream_sink.ops.drill.report import DrillReport
from stream_sink.ops.drill.run import DrillOptions, modes_of, run_drill
from stream_sink.ops.drill.scenarios import failpoint_specs

HEADERS = [
    "scenario",
    "kill moment",
    "restarts",
    "expected",
    "found",
    "duplicated",
    "missing",
    "unexpected",
    "verdict",
]


def drill_epilog() -> str:
    """The failpoints ``--failpoints`` takes, in the order the commit protocol meets them."""
    from stream_sink.commit.failpoints import (
        AFTER_POSITION_DELETES,
        FAILPOINTS,
        MULTI_TABLE_FAILPOINTS,
    )

    names = "\n".join(f"  {name}" for name in FAILPOINTS)
    multi = "\n".join(f"  {name}" for name in MULTI_TABLE_FAILPOINTS)
    return (
        f"failpoints (the steps of the commit protocol, in order):\n{names}\n"
        f"a checkpoint committed to several tables in one transaction (--target routed):"
        f"\n{multi}\n"
        "a deletes='positions' commit, once its deletes are resolved and written "
        f"(--deletes positions):\n  {AFTER_POSITION_DELETES}\n"
        "NAME@N kills at the N-th time the step is reached (default: the first); "
        "lost-tables-answer kills nothing: the N-th transaction commits and its answer "
        "is lost, and the same run must settle it by reading every table back. A "
        "failpoint the chosen target never reaches is refused."
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--failpoints",
        default="all",
        help="all, none, or NAME[@N],... (the names are listed below)",
    )
    parser.add_argument(
        "--random-kills",
        type=int,
        default=0,
        metavar="N",
        help="scenarios killed once at a random moment, per mode",
    )
    parser.add_argument(
        "--seed", type=int, default=7, help="seed of the generated input and the random kills"
    )
    parser.add_argument(
        "--mode", default="upsert", help="append, changelog or upsert (or several, comma-separated)"
    )
    parser.add_argument(
        "--soak",
        type=float,
        default=0.0,
        metavar="MINUTES",
        help="after the planned scenarios, keep killing at random this long",
    )
    parser.add_argument(
        "--json",
        default=None,
        metavar="REPORT",
        help="also write the report as JSON here (default: none)",
    )
    parser.add_argument(
        "--target",
        default="iceberg",
        choices=TARGETS,
        help="the built-in demo pipeline's table: the Iceberg table demo.orders, a "
        "Delta table (lake/orders in each scenario's directory, written by DeltaSink, "
        "which commits every batch), or routed: every change to each of three tables "
        "of a SQL catalog (SQLite) in each scenario's directory, one routed IcebergSink "
        "committing them in one transaction a checkpoint, a checkpoint every batch",
    )
    parser.add_argument(
        "--deletes",
        default="equality",
        choices=DELETE_MODES,
        help="the demo's deletes: equality (the sinks' defaults: Iceberg's delete files "
        "by key, Delta's copy-on-write) or positions (resolved at commit to deletion "
        "vectors or position deletes; the drill then also reads every Iceberg table with "
        "pyiceberg and checks that no snapshot lists an equality delete file, and that no "
        "version of a Delta table rewrote a data file; upsert and changelog modes)",
    )
    parser.add_argument(
        "--job",
        default=None,
        metavar="MODULE:FUNCTION",
        help="your streaming job (default: the built-in demo pipeline)",
    )
    parser.add_argument(
        "--table",
        default=None,
        help="the table --job writes, or its tables, comma-separated (each must hold the "
        "expected rows; default: the demo's demo.orders)",
    )
    parser.add_argument(
        "--expected",
        default=None,
        metavar="MODULE:FUNCTION",
        help="returns the expected final table (pyarrow.Table; default: the demo's expected rows)",
    )
    parser.add_argument(
        "--work-dir", default=None, help="where scenarios run (default: a new temporary directory)"
    )
    parser.add_argument("--rows", type=int, default=1600, help="input size (change events)")
    parser.add_argument("--files", type=int, default=4, help="input files (one per batch)")
    parser.add_argument(
        "--checkpoint-interval-batches",
        type=int,
        default=2,
        help="the sink checkpoints (and commits) every N batches",
    )
    parser.add_argument(
        "--max-kill-delay",
        type=float,
        default=8.0,
        metavar="SECONDS",
        help="random kills land up to this long after a run's first batch",
    )
    parser.add_argument(
        "--mistakes",
        default="none",
        metavar="all|none|NAME,...",
        help="operator mistakes to drill: stale-state-copy, "
        "reused-checkpoint-location, deleted-staged-file",
    )
    parser.add_argument("--parallel", type=int, default=1, help="driver processes running at once")
    add_catalog_options(parser)


def options_from_args(args: argparse.Namespace) -> DrillOptions:
    modes = modes_of(args.mode)
    bad = [m for m in modes if m not in DRILL_MODES]
    if not modes or bad:
        raise InvalidOptionError(f"--mode: expected {'|'.join(DRILL_MODES)}, got {args.mode!r}")
    given = [args.job, args.table, args.expected]
    if any(given) and not all(given):
        raise InvalidOptionError("--job, --table and --expected go together")
    target = getattr(args, "target", "iceberg")
    if args.job and target != "iceberg":
        raise InvalidOptionError(
            "--target chooses the built-in demo's table; a --job names its own with --table "
            "(delta:PATH for a Delta table)"
        )
    mistakes = mistake_names(args.mistakes)
    if target != "iceberg" and mistakes:
        raise InvalidOptionError(
            f"--mistakes drills the Iceberg demo only; drop --target {target} or --mistakes"
        )
    deletes = getattr(args, "deletes", "equality")
    if deletes == "positions" and (args.job or "append" in modes):
        raise InvalidOptionError(
            "--deletes positions drills the built-in demo in upsert or changelog mode; "
            "drop --job or --mode append (a --job sets its own sink's deletes)"
        )
    job = (
        JobSpec(args.job, args.table, args.expected) if args.job else JobSpec.demo(target, deletes)
    )
    catalog = drill_catalog(args)
    if catalog is not None and (target != "iceberg" or mistakes):
        drop = f"--target {target}" if target != "iceberg" else "--mistakes"
        raise InvalidOptionError(
            f"--catalog-type rest drills Iceberg tables with kills; drop {drop} (it drills "
            "tables in each scenario's own directory)"
        )
    failpoints = failpoint_specs(args.failpoints, job.unreachable, job.label, job.every_failpoint)
    return DrillOptions(
        job=job,
        modes=modes,
        failpoints=failpoints,
        random_kills=args.random_kills,
        seed=args.seed,
        soak_minutes=args.soak,
        work_dir=args.work_dir,
        rows=args.rows,
        files=args.files,
        checkpoint_interval_batches=args.checkpoint_interval_batches,
        max_kill_delay_s=args.max_kill_delay,
        parallel=args.parallel,
        mistakes=mistakes,
        catalog=catalog,
    )


def drill_catalog(args: argparse.Namespace) -> dict[str, str] | None:
    """``load_catalog`` arguments of ``--catalog-type rest`` (None: each scenario's own
    Hadoop catalog, the default)."""
    kind = getattr(args, "catalog_type", None)
    props = catalog_properties_of(args)
    if kind in (None, "hadoop") and not args.catalog_uri and not props:
        return None
    if kind != "rest" or not args.catalog_uri:
        raise InvalidOptionError(
            "stream-sink drill: a catalog other than each scenario's own is a REST catalog: "
            "--catalog-type rest --catalog-uri URL [--warehouse W] [--catalog-property K=V]"
        )
    out = {"type": "rest", "uri": args.catalog_uri, **props}
    if args.warehouse:
        out["warehouse"] = args.warehouse
    return out


def run_drill_from_args(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run the drill; 0 when every scenario kept every row exactly once, else 1. The table
    goes to ``out`` (default: stdout), progress to stderr."""
    report = run_drill(options_from_args(args))
    print(render(report), file=out or sys.stdout)
    if args.json:
        with open(args.json, "w") as f:
            f.write(report.dumps())
    return 0 if report.ok else 1


def render(report: DrillReport) -> str:
    rows = []
    for s in report.scenarios:
        p = s.primary
        moment = s.failpoint or "random kill at " + ", ".join(f"{d:.1f}s" for d in s.kill_delays_s)
        if not s.reached:
            moment += " (not reached)"
        verdict = "ok" if s.verdict == "ok" else "FAIL: " + ", ".join(s.problems)
        rows.append(
            [
                s.id.split("/", 1)[0],
                moment,
                s.restarts,
                s.expected_rows,
                p.rows if p else "-",
                p.duplicated if p else "-",
                p.missing if p else "-",
                p.unexpected if p else "-",
                verdict,
            ]
        )
    headers = ["mode", *HEADERS[1:]]
    failed = sum(1 for s in report.scenarios if s.verdict != "ok")
    summary = f"{len(report.scenarios)} scenarios in {report.duration_s:.0f}s: " + (
        "every row exactly once" if report.ok else f"{failed} FAILED"
    )
    return f"{format_table(headers, rows)}\n\n{summary}"

"""Terminal output of the ``stream-sink`` command, through ``rich``.

- :func:`format_table`: a table as text (header, rule, rows; numbers right-aligned and
  grouped). Lines never wrap or get cut: piped into ``less -S``, ``grep`` or a file,
  every cell is whole.
- :func:`progress`: a progress bar on stderr for long commands, shown only when stderr
  is a terminal (scripts and pipes see nothing).
- :func:`quiet_broken_pipe`: a closed pipe (``stream-sink table files X | head``) ends
  the command quietly.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

T = TypeVar("T")
_UNLIMITED_WIDTH = 1_000_000


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns as wide as their widest cell; numeric columns right-aligned."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, highlight=False)
    for i, header in enumerate(headers):
        numeric = bool(rows) and all(_is_number(r[i]) or r[i] is None for r in rows)
        table.add_column(
            str(header), justify="right" if numeric else "left", no_wrap=True, overflow="ignore"
        )
    for row in rows:
        table.add_row(*(_cell(v) for v in row))
    console = Console(
        width=_UNLIMITED_WIDTH, color_system=None, highlight=False, emoji=False, markup=False
    )
    with console.capture() as captured:
        console.print(table)
    return "\n".join(line.rstrip() for line in captured.get().splitlines() if line.strip())


def progress(items: Iterable[T], total: int, description: str) -> Iterator[T]:
    """``items`` unchanged, with a transient progress bar on a terminal's stderr."""
    console = Console(file=sys.stderr)
    if not console.is_terminal or total <= 1:
        yield from items
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(description, total=total)
        for item in items:
            yield item
            bar.advance(task)


@contextlib.contextmanager
def quiet_broken_pipe() -> Iterator[None]:
    """Exit quietly (status 0, as ``yes | head`` does) when stdout's reader has gone."""
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        # Python would report the error again when flushing stdout at exit: point it at
        # /dev/null first (the recipe of Python's signal documentation).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _cell(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, float):
        return f"{v:,.3f}"
    return str(v)

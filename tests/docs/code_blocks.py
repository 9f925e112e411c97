"""The fenced code blocks of the README, CONTRIBUTING.md and ``docs/``, and how the tests
run them.

A page's ```python and ```bash blocks run in order, in one fresh sandbox directory
and one Python namespace, so each page's snippets must work *together*, as a reader
would paste them. Other languages (```text, ```console output) are not run.

A block is left out only when the line just before its fence says why:

    <!-- docs-test: skip because REASON -->

The reason is shown in the test report as the skip reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUNNABLE = ("python", "bash")
SKIP_MARK = re.compile(r"<!--\s*docs-test:\s*skip because (?P<reason>.+?)\s*-->")
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language and text, and why it is skipped."""

    path: str
    line: int
    lang: str
    code: str
    skip_reason: str | None = None

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def pages() -> list[Path]:
    """README.md, CONTRIBUTING.md and every page under docs/."""
    return [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]


def blocks_of(page: Path) -> list[Block]:
    """The page's fenced blocks, in order (an unclosed fence is an error)."""
    lines = page.read_text().splitlines()
    rel = str(page.relative_to(REPO))
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, indent = i, m.group("indent")
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        if i == len(lines):
            raise ValueError(f"{rel}:{start + 1}: code block is never closed")
        mark = SKIP_MARK.search(lines[start - 1]) if start else None
        out.append(
            Block(
                rel,
                start + 1,
                m.group("lang").lower(),
                "\n".join(body) + "\n",
                mark.group("reason") if mark else None,
            )
        )
        i += 1
    return out


def runnable(page: Path) -> list[Block]:
    return [b for b in blocks_of(page) if b.lang in RUNNABLE]

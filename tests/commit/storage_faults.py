"""Real storage faults for tests: a directory moved onto a small tmpfs that can be
filled up (ENOSPC) or remounted read-only (EROFS), then repaired.

Needs the right to mount (root with CAP_SYS_ADMIN, as in CI's container); elsewhere
the tests that use it are skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

FILLER = ".filler"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, check=False)


def can_mount() -> bool:
    probe = tempfile.mkdtemp(prefix="stream-sink-mount-probe-")
    try:
        if _run("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", probe).returncode != 0:
            return False
        _run("umount", probe)
        return True
    except FileNotFoundError:
        return False
    finally:
        os.rmdir(probe)


requires_mount = pytest.mark.skipif(
    not can_mount(), reason="needs permission to mount a tmpfs (root with CAP_SYS_ADMIN)"
)


class Disk:
    """A tmpfs mounted over ``path`` (its former contents copied onto it)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fill(self) -> None:
        """Use up every free byte."""
        with open(os.path.join(self.path, FILLER), "ab", buffering=0) as f:
            for size in (65536, 1):
                try:
                    while f.write(b"\0" * size):
                        pass
                except OSError:
                    pass

    def free(self) -> None:
        filler = os.path.join(self.path, FILLER)
        if os.path.exists(filler):
            os.remove(filler)

    def read_only(self, on: bool = True) -> None:
        mode = "remount,ro" if on else "remount,rw"
        out = _run("mount", "-o", mode, self.path)
        assert out.returncode == 0, out.stderr


@contextmanager
def tmpfs_at(path: str, size: str = "8m") -> Iterator[Disk]:
    """Mount a tmpfs of ``size`` over ``path``; on exit copy its contents back onto the
    real directory and unmount (the test then reads what the faulty disk held)."""
    os.makedirs(path, exist_ok=True)
    saved = tempfile.mkdtemp(prefix="stream-sink-disk-")
    shutil.copytree(path, saved, dirs_exist_ok=True)
    out = _run("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path)
    assert out.returncode == 0, out.stderr
    disk = Disk(path)
    try:
        shutil.copytree(saved, path, dirs_exist_ok=True)
        yield disk
    finally:
        _run("mount", "-o", "remount,rw", path)
        disk.free()
        shutil.rmtree(saved, ignore_errors=True)
        keep = tempfile.mkdtemp(prefix="stream-sink-disk-")
        shutil.copytree(path, keep, dirs_exist_ok=True)
        _run("umount", "-l", path)
        shutil.copytree(keep, path, dirs_exist_ok=True)
        shutil.rmtree(keep, ignore_errors=True)

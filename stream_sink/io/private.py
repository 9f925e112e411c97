"""Local files and directories only their owner may read: a sink's checkpoints and its
operator state, which record the table, its catalog settings and the batches' files.

Invariants: on the local filesystem the directories these helpers create or are given
are ``0700`` and the files ``0600`` (the owner's; a umask may take more away, never
add). Files RocksDB creates later inside such a directory keep RocksDB's own mode, and
the ``0700`` directory keeps them out of other users' reach. A directory or file the
process does not own is left as it is (``chmod`` refused) rather than failing a write.
"""

from __future__ import annotations

import contextlib
import logging
import os

log = logging.getLogger(__name__)

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def private_dirs(path: str) -> None:
    """Create ``path`` and its missing parents ``0700``; ``path`` itself is made
    ``0700`` when it exists already."""
    path = os.path.abspath(path)
    missing: list[str] = []
    probe = path
    while not os.path.isdir(probe):
        missing.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, PRIVATE_DIR)
    _chmod(path, PRIVATE_DIR)


def make_private_tree(path: str) -> None:
    """``path`` and every directory under it ``0700``, every file ``0600``."""
    if os.path.isfile(path):
        _chmod(path, PRIVATE_FILE)
        return
    for root, _dirs, files in os.walk(path):
        _chmod(root, PRIVATE_DIR)
        for name in files:
            _chmod(os.path.join(root, name), PRIVATE_FILE)


def _chmod(path: str, mode: int) -> None:
    try:
        os.chmod(path, mode)
    except FileNotFoundError:
        pass
    except PermissionError as e:  # another user's directory: not ours to change
        log.debug("keeping the mode of %s: %s", path, e)

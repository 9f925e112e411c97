"""Copying a local directory tree to a FileIO location and back, and writing a state
snapshot to a location.

Uploads to a local filesystem are fsync'd (files and directories), so a checkpoint
whose ``_metadata`` is durable also has durable state files.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pyarrow.fs as pafs

from stream_sink.io.fileio import FileIO
from stream_sink.io.private import make_private_tree
from stream_sink.state import OperatorStateBackend
from stream_sink.state.layout import fsync_dir, fsync_tree


def write_snapshot(io: FileIO, backend: OperatorStateBackend, location: str) -> None:
    """A durable snapshot of ``backend`` at ``location`` (which must not exist).

    Local: the backend snapshots straight into place (RocksDB hard-links its immutable
    SST files rather than copying them), then every file and directory of the snapshot
    is made the owner's only (``0600``/``0700``) and fsync'd, with the directory
    holding its parent. Elsewhere: snapshot into a
    temporary local directory and upload it.
    """
    if io.scheme == "file":
        dest = io.path_of(location)
        backend.snapshot_to(dest)
        make_private_tree(dest)
        fsync_tree(dest)
        fsync_dir(os.path.dirname(os.path.dirname(dest)))
        return
    local = tempfile.mkdtemp(prefix="stream-sink-chk-")
    try:
        backend.snapshot_to(f"{local}/state")
        upload_dir(io, f"{local}/state", location)
    finally:
        shutil.rmtree(local, ignore_errors=True)


def upload_dir(io: FileIO, local_dir: str, location: str) -> None:
    """Copy every file under ``local_dir`` to ``location`` (same relative paths)."""
    dest = io.path_of(location)
    if io.scheme == "file":
        os.makedirs(dest, exist_ok=True)
    pafs.copy_files(
        os.path.abspath(local_dir),
        dest,
        source_filesystem=pafs.LocalFileSystem(),
        destination_filesystem=io.filesystem(),
    )
    if io.scheme == "file":
        fsync_tree(dest)


def download_dir(io: FileIO, location: str, local_dir: str) -> int:
    """Copy every file under ``location`` into ``local_dir``; the number of files."""
    os.makedirs(local_dir, exist_ok=True)
    files = list_files(io, location)
    if files:
        pafs.copy_files(
            io.path_of(location),
            os.path.abspath(local_dir),
            source_filesystem=io.filesystem(),
            destination_filesystem=pafs.LocalFileSystem(),
        )
    return len(files)


def list_files(io: FileIO, location: str) -> list[str]:
    """Paths of the files under ``location``, relative to it (empty when absent)."""
    return sorted(f.relative for f in io.walk(location))

"""What the tests' Java and Go servers share: their jars resolved by Maven once per pom
version, a free loopback port, a start that stops the server when it never gets ready,
and stopping a server's whole process group.

Invariants: a jar directory is used only once it holds a ``.complete`` marker (a
resolution that failed half-way is done again); a stopped server leaves no process of
its group behind.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar


def resolve_jars(pom: Path, cache: Path, name: str) -> Path:
    """The directory of ``pom``'s dependencies under ``cache`` (``<name>-<pom digest>``),
    resolved with Maven's client the first time."""
    digest = hashlib.sha1(pom.read_bytes()).hexdigest()[:12]
    jars = cache / f"{name}-{digest}"
    done = jars / ".complete"
    if done.exists():
        return jars
    mvn = shutil.which("mvn")
    if mvn is None:
        raise FileNotFoundError("mvn is not installed (apt-get install maven)")
    jars.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
         f"-DoutputDirectory={jars}"],
        check=True,
        stdin=subprocess.DEVNULL,
        timeout=900,
    )  # fmt: skip
    done.touch()
    return jars


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_group(process: subprocess.Popen[bytes], timeout_s: float = 20.0) -> None:
    """SIGTERM to ``process``'s group (it leads one), then SIGKILL to what is left."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # whatever of the group is left
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout_s)


class Server(Protocol):
    def stop(self, timeout_s: float = 20.0) -> None: ...


S = TypeVar("S", bound=Server)


def started(server: S, wait_ready: Callable[[], None]) -> S:
    """``server`` once ``wait_ready`` returns; stopped (the error raised on) when it does
    not. Stopped at interpreter exit in any case."""
    atexit.register(server.stop)
    try:
        wait_ready()
    except BaseException:
        server.stop()
        raise
    return server

"""Apache Iceberg's own REST catalog server (``org.apache.iceberg.rest.RESTCatalogServer``,
from the ``iceberg-open-api`` test fixtures on Maven Central, backed by its JDBC catalog on
SQLite, tables on the local filesystem through HadoopFileIO): the reference
implementation of the protocol.

``IcebergRestServer.start(directory)`` resolves the jars with Maven's client from
``tests/rest/pom.xml`` (cached under ~/.m2 and in a jar directory per pom version), starts
the server on a free port with ``CATALOG_*`` environment variables (the server's own
configuration: ``CATALOG_URI``, ``CATALOG_WAREHOUSE``, ``CATALOG_REST_PORT``), waits for
``/v1/config``, and ``stop()`` ends the process group it started. The server binds every
interface (Jetty's default); the tests only talk to it on loopback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import server_process

POM = Path(__file__).resolve().parent / "rest" / "pom.xml"
MAIN = "org.apache.iceberg.rest.RESTCatalogServer"


def resolve_jars(cache: Path) -> Path:
    """The server's classpath directory, resolved by Maven once per pom version."""
    return server_process.resolve_jars(POM, cache, "iceberg-rest-server")


@dataclass
class IcebergRestServer:
    process: subprocess.Popen[bytes]
    uri: str
    warehouse: str
    log_path: Path

    @staticmethod
    def start(directory: Path, jars: Path, timeout_s: float = 120.0) -> IcebergRestServer:
        java = shutil.which("java", path=os.path.join(os.environ.get("JAVA_HOME", ""), "bin"))
        java = java or shutil.which("java")
        if java is None:
            raise FileNotFoundError("no java on PATH or in JAVA_HOME")
        directory.mkdir(parents=True, exist_ok=True)
        warehouse = directory / "warehouse"
        warehouse.mkdir(exist_ok=True)
        port = server_process.free_port()
        env = {
            **os.environ,
            "CATALOG_URI": f"jdbc:sqlite:file:{directory / 'catalog.db'}",
            "CATALOG_WAREHOUSE": str(warehouse),
            "CATALOG_REST_PORT": str(port),
        }
        log_path = directory / "server.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [java, "-Xmx512m", "-cp", f"{jars}/*", MAIN],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        server = IcebergRestServer(proc, f"http://127.0.0.1:{port}", str(warehouse), log_path)
        return server_process.started(server, lambda: server._wait_ready(timeout_s))

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the REST server exited; see {self.log_path}")
            try:
                with urllib.request.urlopen(f"{self.uri}/v1/config", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the REST server is not up after {timeout_s}s; see {self.log_path}"
                )
            time.sleep(0.3)

    def stop(self, timeout_s: float = 20.0) -> None:
        """End the server's process group (also run at interpreter exit)."""
        server_process.stop_group(self.process, timeout_s)

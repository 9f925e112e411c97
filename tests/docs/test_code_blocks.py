"""Every ```python and ```bash block of README.md, CONTRIBUTING.md and docs/ runs as
written.

Each page runs in its own child process and sandbox directory (see ``run_blocks.py``),
with the environment a reader following the quickstart has: this interpreter's
``bin/`` first on PATH (the ``stream-sink`` command), the repository importable, and
``PYSPARK_PYTHON`` pointing at this interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import debezium_page
import operations_page
import pytest
from code_blocks import REPO, Block, pages, runnable
from kill_harness import short_driver_submit_args

HERE = Path(__file__).resolve().parent
SPARK_HINTS = ("local_session", "pyspark", "SparkSession", "stream-sink demo", "stream-sink drill")


def _page_params() -> list[object]:
    params = []
    for page in pages():
        blocks = [b for b in runnable(page) if b.skip_reason is None]
        if not blocks:
            continue
        spark = any(h in b.code for b in blocks for h in SPARK_HINTS)
        # a fresh Python process per page (seconds), Spark on most pages (minutes)
        marks = [pytest.mark.slow, pytest.mark.spread, *([pytest.mark.spark] if spark else [])]
        params.append(pytest.param(page, id=str(page.relative_to(REPO)), marks=marks))
    return params


def _skipped_params() -> list[object]:
    return [
        pytest.param(b, id=b.where)
        for page in pages()
        for b in runnable(page)
        if b.skip_reason is not None
    ]


def sandbox_env() -> dict[str, str]:
    env = dict(os.environ)
    bin_dir = os.path.dirname(sys.executable)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    if "PYSPARK_SUBMIT_ARGS" not in env:
        env["PYSPARK_SUBMIT_ARGS"] = short_driver_submit_args()  # JVM flags only
    return env


def s3_env(s3_props: dict[str, str]) -> dict[str, str]:
    """The standard AWS variables naming the test S3 server (bucket ``lake``), as a reader
    with MinIO or AWS would have them set."""
    return {
        "AWS_ENDPOINT_URL": s3_props["s3.endpoint"],
        "AWS_ACCESS_KEY_ID": s3_props["s3.access-key-id"],
        "AWS_SECRET_ACCESS_KEY": s3_props["s3.secret-access-key"],
        "AWS_REGION": s3_props["s3.region"],
    }


@pytest.mark.timeout(1500)  # a page may start several Spark jobs (the demo kills one)
@pytest.mark.parametrize("page", _page_params())
def test_page_code_blocks_run(page: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    blocks = [b for b in runnable(page) if b.skip_reason is None]
    env = sandbox_env()
    if any("ICEBERG_REST_URI" in b.code for b in blocks):  # SeaweedFS: S3 and REST catalog
        seaweed = request.getfixturevalue("seaweed")
        env.update(s3_env(seaweed.s3_props))
        env["ICEBERG_REST_URI"] = seaweed.catalog_uri
    elif any("s3://" in b.code for b in blocks):  # such blocks talk to the test S3 server
        env.update(s3_env(request.getfixturevalue("s3_props")))
    stack = None
    if any("KAFKA_BOOTSTRAP_SERVERS" in b.code for b in blocks):  # a page reading Kafka
        stack = request.getfixturevalue("cdc_stack")
        if page.name == "operations.md":  # the recovery runbook: a topic it fills itself
            env.update(operations_page.prepare(stack))
        else:  # docs/debezium.md: Debezium fills its topic from PostgreSQL
            env.update(debezium_page.prepare(stack, tmp_path / "connect"))
    spec = tmp_path / "blocks.json"
    spec.write_text(
        json.dumps([{"where": b.where, "lang": b.lang, "code": b.code} for b in blocks])
    )
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    proc = subprocess.run(
        [sys.executable, str(HERE / "run_blocks.py"), str(spec)],
        cwd=sandbox,
        env=env,
        capture_output=True,
        text=True,
        timeout=1400,
    )
    assert proc.returncode == 0, (
        f"{page.name}: a code block failed\n--- stdout\n{proc.stdout[-6000:]}\n"
        f"--- stderr\n{proc.stderr[-6000:]}"
    )
    if stack is not None and page.name != "operations.md":
        debezium_page.check(stack, sandbox)


@pytest.mark.parametrize("block", _skipped_params())
def test_block_marked_not_runnable(block: Block) -> None:
    """Listed so the report shows each block left out, with its reason."""
    assert len(block.skip_reason or "") >= 10, f"{block.where}: give a real reason"
    pytest.skip(f"{block.where}: {block.skip_reason}")


def test_every_page_has_closed_fences_and_known_markers() -> None:
    for page in pages():
        text = page.read_text()
        for number, line in enumerate(text.splitlines(), 1):
            if "docs-test:" in line and "docs-test: skip because" not in line:
                pytest.fail(f"{page.name}:{number}: unknown docs-test marker: {line.strip()}")
        runnable(page)  # raises on an unclosed fence

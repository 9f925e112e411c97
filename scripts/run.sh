#!/usr/bin/env bash
# scripts/run.sh demo|test|test-fast [args…]: set up (idempotent), then run the demo, the
# tests (test: the whole suite, what CI runs) or the fast tests (test-fast: those not
# marked slow, i.e. no Spark, JVM, servers or kills; minutes). Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-test}"
case "$what" in
  demo|test) scripts/setup.sh "$what" ;;
  test-fast) scripts/setup.sh test ;;
esac
JAVA_HOME="$(scripts/java-home.sh)"
export JAVA_HOME PATH="$JAVA_HOME/bin:$PWD/.venv/bin:$PATH"
export PYSPARK_PYTHON="$PWD/.venv/bin/python" PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
shift || true
case "$what" in
  demo)
    # a child, not exec: the demo times itself from its own process start, which
    # must not include setting up .venv above
    status=0
    .venv/bin/stream-sink demo "$@" || status=$?
    exit "$status" ;;
  test|test-fast)
    if [ -z "${STREAM_SINK_TEST_POSTGRES_URL:-}" ] && [ -x .ci/postgres.sh ]; then
      # a throwaway server for this run only: stopped and removed however the run ends
      pg_dir="$(mktemp -d "${TMPDIR:-/tmp}/stream-sink-pg.XXXXXX")"
      trap '.ci/postgres.sh stop "$pg_dir"; rm -rf "$pg_dir"' EXIT
      STREAM_SINK_TEST_POSTGRES_URL="$(.ci/postgres.sh "$pg_dir")" && export STREAM_SINK_TEST_POSTGRES_URL
    fi
    status=0
    if [ "$what" = test-fast ]; then
      .venv/bin/python -m pytest -m "not slow" "$@" || status=$?
      exit "$status"
    fi
    # one line per test file, with the time so far (tests/conftest.py) and the share done
    .venv/bin/python -m pytest "$@" || status=$?
    if [ "$#" -eq 0 ]; then  # the whole suite: also the Spark tests on pyspark 3.5
      .ci/scripts/spark35.sh || status=$?
    fi
    exit "$status" ;;
  *) echo "usage: scripts/run.sh demo|test|test-fast [args…]" >&2; exit 2 ;;
esac

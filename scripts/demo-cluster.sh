#!/usr/bin/env bash
# make demo-cluster: the CDC demo (scripts/demo_cluster.py) on the local cluster of
# scripts/cluster.sh. A cluster already up is used and left running; otherwise it is
# started (the first time this installs what it needs: scripts/setup.sh cluster) and
# stopped however the demo ends, a failed or interrupted start included, unless
# STREAM_SINK_CLUSTER_KEEP=1. Exit 0 when the Iceberg table equals the source table.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${STREAM_SINK_CLUSTER_DIR:-$PWD/.cluster}"
export STREAM_SINK_CLUSTER_DIR="$DIR"
rc=0
scripts/cluster.sh status >/dev/null 2>&1 || rc=$?
case "$rc" in
  0) echo "demo-cluster: using the cluster that is up in $DIR" >&2 ;;
  3)
    if [ "${STREAM_SINK_CLUSTER_KEEP:-0}" != 1 ]; then trap 'scripts/cluster.sh down' EXIT; fi
    echo "demo-cluster: starting the cluster (scripts/cluster.sh up; minutes the first time)" >&2
    scripts/cluster.sh up >/dev/null ;;
  *)
    echo "demo-cluster: the cluster in $DIR runs but is not healthy:" >&2
    scripts/cluster.sh status >&2 || true
    echo "demo-cluster: stop it with scripts/cluster.sh down, then run this again" >&2
    exit 1 ;;
esac
JAVA_HOME="$(scripts/java-home.sh)"
export JAVA_HOME PATH="$JAVA_HOME/bin:$PWD/.venv/bin:$PATH"
export PYSPARK_PYTHON="$PWD/.venv/bin/python" PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
.venv/bin/python scripts/demo_cluster.py "$DIR"
if [ "$rc" = 3 ] && [ "${STREAM_SINK_CLUSTER_KEEP:-0}" = 1 ]; then
  echo "demo-cluster: the cluster is left running; stop it with scripts/cluster.sh down" >&2
fi

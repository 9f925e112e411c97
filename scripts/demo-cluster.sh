#!/usr/bin/env bash
# make demo-cluster: the CDC demo (scripts/demo_cluster.py) on the local cluster of
# scripts/cluster.sh, which it starts when down and stops afterwards unless it was
# already up or STREAM_SINK_CLUSTER_KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${STREAM_SINK_CLUSTER_DIR:-$PWD/.cluster}"
export STREAM_SINK_CLUSTER_DIR="$DIR"
if scripts/cluster.sh status >/dev/null 2>&1; then
  keep=1
else
  keep="${STREAM_SINK_CLUSTER_KEEP:-0}"
  scripts/cluster.sh up >/dev/null
fi
if [ "$keep" != 1 ]; then trap 'scripts/cluster.sh down' EXIT; fi
JAVA_HOME="$(scripts/java-home.sh)"
export JAVA_HOME PATH="$JAVA_HOME/bin:$PWD/.venv/bin:$PATH"
export PYSPARK_PYTHON="$PWD/.venv/bin/python" PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
.venv/bin/python scripts/demo_cluster.py "$DIR"

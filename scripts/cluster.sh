#!/usr/bin/env bash
# The production topology of a CDC pipeline on this machine, as local processes:
# PostgreSQL (wal_level=logical) with the table public.source, SeaweedFS (S3 and its
# Iceberg REST catalog, table bucket "warehouse", bucket "ckpt"), an Apache Kafka broker
# (KRaft), Kafka Connect with Debezium's PostgreSQL connector (topic cdc.public.source),
# and a Spark master with two workers. The configuration files are docker/cdc/*.properties,
# the same as docker-compose.yml's.
#
#   scripts/cluster.sh up       start it (first run: installs with scripts/setup.sh cluster)
#   scripts/cluster.sh status   each service's health as a user would check it (a table),
#                               then the addresses as KEY=VALUE lines; exit 0 when all
#                               are up, 1 when one is down, 3 when nothing runs
#   scripts/cluster.sh down     stop everything it started
#
# Its files live in $STREAM_SINK_CLUSTER_DIR (default .cluster in the repository), those
# of the previous cluster removed at start; the addresses in
# $STREAM_SINK_CLUSTER_DIR/env (POSTGRES_URL, KAFKA_BOOTSTRAP, CONNECT_URL, TOPIC,
# SPARK_MASTER, SPARK_MASTER_UI, CATALOG_JSON, S3_ENDPOINT). Ports are free ones, picked
# at start.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${STREAM_SINK_CLUSTER_DIR:-$PWD/.cluster}"
PIDFILE="$DIR/supervisor.pid"

running() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

up() {
  if running; then status; return; fi
  scripts/setup.sh cluster >&2
  mkdir -p "$DIR"
  rm -f "$DIR/env"
  # every start is a new cluster: PostgreSQL's server is a new one each time, so Kafka's
  # topics, Debezium's stored offsets, the tables and the checkpoints of a previous one
  # would describe a database that is gone (and Kafka's config names its old ports)
  rm -rf "$DIR/kafka" "$DIR/connect" "$DIR/seaweed" "$DIR/spark" "$DIR"/demo_*
  JAVA_HOME="$(scripts/java-home.sh)"
  export JAVA_HOME PATH="$JAVA_HOME/bin:$PWD/.venv/bin:$PATH"
  export PYSPARK_PYTHON="$PWD/.venv/bin/python" PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
  setsid .venv/bin/python tests/cdc_stack.py --dir "$DIR" --cluster \
    >"$DIR/cluster.log" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  echo "cluster: starting (log: $DIR/cluster.log)" >&2
  for _ in $(seq 1 900); do
    if [ -f "$DIR/env" ]; then status; return; fi
    if ! running; then
      tail -n 40 "$DIR/cluster.log" >&2
      echo "cluster: failed to start" >&2
      exit 1
    fi
    sleep 1
  done
  echo "cluster: not up after 900 s (log: $DIR/cluster.log)" >&2
  exit 1
}

down() {
  if running; then
    kill -TERM "$(cat "$PIDFILE")"
    for _ in $(seq 1 180); do running || break; sleep 1; done
    if running; then kill -KILL -- "-$(cat "$PIDFILE")" 2>/dev/null || true; fi
    echo "cluster: stopped" >&2
  else
    echo "cluster: not running" >&2
  fi
  rm -f "$PIDFILE" "$DIR/env"
}

# the health table (scripts/cluster_status.py; the standard library suffices when down)
health() {
  local py=python3
  if [ -x .venv/bin/python ]; then py=.venv/bin/python; fi
  "$py" scripts/cluster_status.py "$DIR" "$@"
}

status() {
  local rc=0
  if running && [ -f "$DIR/env" ]; then
    echo "cluster: running (supervisor pid $(cat "$PIDFILE"), log: $DIR/cluster.log)" >&2
    health || rc=$?
    echo
    cat "$DIR/env"
    return "$rc"
  elif running; then
    echo "cluster: starting (log: $DIR/cluster.log)" >&2
    health --starting || rc=$?
    return "$rc"
  else
    # with addresses left by a supervisor that died, each service is still checked
    echo "cluster: down (no supervisor)" >&2
    health || true
    return 3
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) sed -n 9,13p "$0" >&2; exit 2 ;;
esac

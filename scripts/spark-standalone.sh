#!/usr/bin/env bash
# A Spark standalone master or worker from pyspark's own distribution (no Docker needed).
#
#   scripts/spark-standalone.sh master HOST PORT WEBUI_PORT
#   scripts/spark-standalone.sh worker MASTER_URL CORES MEMORY [WORK_DIR]
#
# Runs in the foreground (exec): stop it by signalling its process group. SPARK_HOME
# defaults to the installed pyspark package. The tests start a master and two workers
# on 127.0.0.1 with it; the docker-compose image runs the same commands.
#
# STREAM_SINK_S3A=1 puts Spark's s3a:// filesystem (hadoop-aws of pyspark's Hadoop version
# and the AWS SDK bundle, resolved by scripts/s3a-jars.sh) on the daemon's classpath and
# so on that of every executor a worker launches: for checkpoints and tables on s3a://.
set -euo pipefail
if [ -z "${SPARK_HOME:-}" ]; then
  SPARK_HOME="$(${PYTHON:-python3} -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
  export SPARK_HOME
fi
if [ "${STREAM_SINK_S3A:-0}" = 1 ]; then
  s3a="$("$(dirname "$0")/s3a-jars.sh" | tr , :)"
  SPARK_DIST_CLASSPATH="${SPARK_DIST_CLASSPATH:+$SPARK_DIST_CLASSPATH:}$s3a"
  export SPARK_DIST_CLASSPATH
fi
role="${1:?usage: spark-standalone.sh master|worker ...}"; shift
case "$role" in
  master)
    exec "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master \
      --host "${1:?host}" --port "${2:?port}" --webui-port "${3:-8080}" ;;
  worker)
    args=(--cores "${2:-1}" --memory "${3:-1g}")
    if [ -n "${4:-}" ]; then args+=(--work-dir "$4"); fi
    host="${SPARK_LOCAL_IP:-}"
    if [ -n "$host" ]; then args+=(--host "$host"); fi
    exec "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker \
      "${args[@]}" --webui-port 0 "${1:?master url}" ;;
  *) echo "usage: spark-standalone.sh master|worker ..." >&2; exit 2 ;;
esac

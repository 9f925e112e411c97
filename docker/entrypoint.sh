#!/usr/bin/env bash
# master | worker | job [demo options…]
set -euo pipefail
role="${1:-job}"; shift || true
case "$role" in
  master)
    exec spark-standalone.sh master "$(hostname)" 7077 8080 ;;
  worker)
    exec spark-standalone.sh worker "${SPARK_MASTER:-spark://spark-master:7077}" \
      "${SPARK_WORKER_CORES:-2}" "${SPARK_WORKER_MEMORY:-2g}" ;;
  job)
    # the same `stream-sink demo` as on a laptop; only its configuration differs
    exec stream-sink demo \
      --master "${SPARK_MASTER:-spark://spark-master:7077}" \
      --catalog-uri "${CATALOG_URI}" \
      --warehouse "${WAREHOUSE}" \
      --checkpoint-location "${CHECKPOINT_LOCATION}" \
      --input "${INPUT_LOCATION}" \
      --state-dir "${STATE_DIR:-/state}" \
      --catalog-prop "s3.endpoint=${S3_ENDPOINT}" \
      --catalog-prop "s3.access-key-id=${AWS_ACCESS_KEY_ID}" \
      --catalog-prop "s3.secret-access-key=${AWS_SECRET_ACCESS_KEY}" \
      --catalog-prop "s3.region=${AWS_REGION:-us-east-1}" \
      --spark-conf "spark.driver.host=$(hostname)" \
      --spark-conf "spark.driver.bindAddress=0.0.0.0" \
      --spark-conf "spark.sql.shuffle.partitions=${SHUFFLE_PARTITIONS:-4}" \
      "$@" ;;
  *) exec "$role" "$@" ;;
esac

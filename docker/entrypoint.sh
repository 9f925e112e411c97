#!/usr/bin/env bash
# master | worker | job [demo options…] | kafka | connect | seaweed | cdc-demo
# The CDC roles run what tests/cdc_stack.py runs for scripts/cluster.sh, with the same
# docker/cdc files and settings (JVM heaps, weed flags; tests/cdc/test_topology.py).
set -euo pipefail
role="${1:-job}"; shift || true
CDC=/opt/stream-sink/docker/cdc
# a docker/cdc file with its ${NAME} placeholders filled from the environment
render() { envsubst <"$CDC/$1" >"/tmp/$1"; echo "/tmp/$1"; }
case "$role" in
  kafka)
    export KAFKA_DATA=/var/lib/kafka
    config="$(render kafka.properties)"
    if [ ! -f "$KAFKA_DATA/meta.properties" ]; then
      java -cp '/opt/kafka-debezium/*' kafka.tools.StorageTool format \
        -t "${KAFKA_CLUSTER_ID:-c3RyZWFtLXNpbmstY2RjMQ}" -c "$config"
    fi
    exec java -Xmx384m -cp '/opt/kafka-debezium/*' kafka.Kafka "$config" ;;
  connect)
    export CONNECT_DATA=/var/lib/connect
    mkdir -p "$CONNECT_DATA"
    exec java -Xmx384m -cp '/opt/kafka-debezium/*' \
      org.apache.kafka.connect.cli.ConnectStandalone \
      "$(render connect-worker.properties)" "$(render debezium-postgres.properties)" ;;
  seaweed)
    exec weed mini -dir=/data -ip=seaweedfs -ip.bind=0.0.0.0 -master.telemetry=false \
      -s3.port=8333 -s3.port.iceberg=8181 -bucket=ckpt -tableBucket=warehouse \
      -s3.port.lance=0 -webdav=false -admin.ui=false ;;
  cdc-demo)
    mkdir -p /work/cluster
    printf '%s\n' "POSTGRES_URL=$POSTGRES_URL" "KAFKA_BOOTSTRAP=$KAFKA_BOOTSTRAP" \
      "TOPIC=$TOPIC" "SPARK_MASTER=${SPARK_MASTER:-spark://spark-master:7077}" \
      "CATALOG_JSON=$CATALOG_JSON" >/work/cluster/env
    STREAM_SINK_SPARK_JARS="$(ls -d /opt/spark-kafka/*.jar | paste -sd, -)"
    export STREAM_SINK_SPARK_JARS
    exec python /opt/stream-sink/scripts/demo_cluster.py /work/cluster ;;
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

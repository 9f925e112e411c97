#!/usr/bin/env bash
# The jars Spark needs to read and write s3a:// (its checkpointLocation on an object
# store): hadoop-aws at pyspark's own Hadoop version and the AWS SDK bundle it depends on,
# resolved from Maven Central by Maven (scripts/s3a/pom.xml) and cached in ~/.m2.
#
#   scripts/s3a-jars.sh [HADOOP_VERSION]
#
# Prints the jars, comma-separated (a value for spark.jars). Without HADOOP_VERSION the
# version is that of the pyspark that ${PYTHON:-python3} imports (its
# jars/hadoop-client-api-<version>.jar). The list is kept in
# ${STREAM_SINK_S3A_HOME:-$HOME/.cache/stream-sink/s3a}/hadoop-<version>.jars, where
# stream_sink.spark.local_session(s3a=...) finds it; later runs need no Maven.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${STREAM_SINK_S3A_HOME:-$HOME/.cache/stream-sink/s3a}"
version="${1:-}"
if [ -z "$version" ]; then
  jars="$(${PYTHON:-python3} -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')"
  api="$(ls "$jars"/hadoop-client-api-*.jar 2>/dev/null | head -1)"
  [ -n "$api" ] || { echo "s3a-jars: no hadoop-client-api jar in $jars" >&2; exit 1; }
  version="$(basename "$api" .jar)"; version="${version#hadoop-client-api-}"
fi
list="$CACHE/hadoop-$version.jars"
if [ ! -s "$list" ] || ! tr , '\n' <"$list" | while read -r j; do [ -f "$j" ] || exit 1; done; then
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.lock-$version"; flock 9
  command -v mvn >/dev/null || { echo "s3a-jars: needs Maven (apt-get install maven)" >&2; exit 1; }
  java_home="$("$HERE/java-home.sh")"
  raw="$CACHE/.hadoop-$version.classpath.$$"
  JAVA_HOME="$java_home" mvn -q -B -f "$HERE/s3a/pom.xml" -Dhadoop.version="$version" \
    dependency:build-classpath -DincludeScope=runtime -Dmdep.outputFile="$raw" \
    >"$CACHE/hadoop-$version.mvn.log" 2>&1 </dev/null \
    || { cat "$CACHE/hadoop-$version.mvn.log" >&2; echo "s3a-jars: Maven could not resolve hadoop-aws $version" >&2; exit 1; }
  tr : , <"$raw" >"$list.tmp" && mv "$list.tmp" "$list" && rm -f "$raw"
fi
cat "$list"; echo

#!/usr/bin/env bash
# The Python to run a benchmark with a peer set's Spark jars and our sink in one session:
# prints the path of `.venv-peer-SET/bin/python`, creating it first when missing.
#
#   bash bench/peer_python.sh SET      e.g. iceberg-spark-4.1, delta-spark-4.2
#
# A peer's Spark jars load only in the Spark they were built for (Iceberg's runtime for
# Spark 4.1 and Delta Lake's jars for Spark 4.2 both fail in pyspark 4.3), so such a
# benchmark runs on the set's own pyspark. `.venv-peer-SET` holds only links to the
# pyspark and py4j of the set's venv (`tests/peers/peer python SET`, installed and cached
# there on first use); a .pth file then adds .venv's site-packages after its own, so
# stream_sink (editable), pyarrow and everything else come from .venv, as in
# `.ci/scripts/spark35.sh`. Nothing is downloaded beyond what `peer` installs.
# The benchmarks that need a set re-run themselves with this Python (bench/peer_spark.py).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 1 ] || { echo "usage: bash bench/peer_python.sh SET" >&2; exit 2; }
set_name="$1"
[ -x .venv/bin/python ] || bash scripts/setup.sh test >&2
peer_python="$(bash tests/peers/peer python "$set_name")"
V=".venv-peer-$set_name"
stamp="$V/.linked-$(echo "$peer_python" | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "peer_python: creating $V (pyspark of peer set $set_name)" >&2
  rm -rf "$V"
  .venv/bin/python -m venv --without-pip "$V"
  site="$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  main_site="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  peer_site="$("$peer_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  for entry in "$peer_site"/pyspark "$peer_site"/pyspark-*.dist-info \
    "$peer_site"/py4j "$peer_site"/py4j-*.dist-info; do
    ln -s "$entry" "$site/"
  done
  echo "import site; site.addsitedir('$main_site')" > "$site/zz-stream-sink-main-venv.pth"
  touch "$stamp"
fi
echo "$PWD/$V/bin/python"

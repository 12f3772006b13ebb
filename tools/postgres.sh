#!/usr/bin/env bash
# A throwaway PostgreSQL server on loopback for the cluster tests' job journal.
#
#   eval "$(tools/postgres.sh start)"   # installs Debian's postgresql if missing, starts a server on a
#                                       # free 127.0.0.1 port in a new data directory, creates the
#                                       # database xla_jobs, and prints the exports the tests read:
#                                       # XLA_ACTORS_TEST_POSTGRES_URL, XLA_ACTORS_TEST_POSTGRES_USER,
#                                       # XLA_ACTORS_PG_DIR
#   tools/postgres.sh stop              # stops the server of $XLA_ACTORS_PG_DIR and deletes its data
#
# Everything but the export lines goes to stderr. Trust authentication, loopback only: for tests, never
# for data anyone keeps.
set -euo pipefail

log() { echo "postgres.sh: $*" >&2; }

pg_bin() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$dir" ] && [ -x "$dir/postgres" ]; then
    echo "$dir"
  fi
}

# Runs a PostgreSQL program as the postgres user when we are root (initdb and the server refuse root).
as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

start() {
  local bin
  bin=$(pg_bin)
  if [ -z "$bin" ]; then
    log "installing Debian's postgresql package"
    if [ "$(id -u)" != 0 ]; then
      log "not root: install it with 'sudo apt-get install -y postgresql' and run this again"
      exit 1
    fi
    # The package's own cluster is not used; policy-rc.d keeps the package from starting it.
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    export DEBIAN_FRONTEND=noninteractive
    (apt-get install -y -q postgresql >&2 || { apt-get update -q >&2 && apt-get install -y -q postgresql >&2; })
    rm -f /usr/sbin/policy-rc.d
    bin=$(pg_bin)
    [ -n "$bin" ] || { log "postgresql installed but no server binary under /usr/lib/postgresql"; exit 1; }
  fi
  local dir port
  dir=$(mktemp -d /tmp/xla-actors-pg.XXXXXX)
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  if [ "$(id -u)" = 0 ]; then
    chown postgres "$dir"
  fi
  chmod 700 "$dir"
  as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off" start >&2 \
    || { cat "$dir/server.log" >&2; exit 1; }
  as_owner "$bin/psql" -q -h 127.0.0.1 -p "$port" -U postgres -c 'CREATE DATABASE xla_jobs' >&2
  log "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port, data in $dir"
  echo "export XLA_ACTORS_TEST_POSTGRES_URL=jdbc:postgresql://127.0.0.1:$port/xla_jobs"
  echo "export XLA_ACTORS_TEST_POSTGRES_USER=postgres"
  echo "export XLA_ACTORS_PG_DIR=$dir"
}

stop() {
  local dir=${XLA_ACTORS_PG_DIR:-}
  if [ -z "$dir" ] || [ ! -d "$dir/data" ]; then
    log "no server to stop (XLA_ACTORS_PG_DIR is '${dir}')"
    return 0
  fi
  as_owner "$(pg_bin)/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac

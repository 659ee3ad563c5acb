#!/bin/bash
# Starts PostgreSQL on $PGDATA, initializing it first when it is empty: superuser
# $POSTGRES_USER with $POSTGRES_PASSWORD (or the contents of $POSTGRES_PASSWORD_FILE), database
# $POSTGRES_DB, password (SCRAM) logins from any address, trust only on the local socket.
# Extra arguments go to postgres (e.g. -c max_connections=50).
set -euo pipefail

user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
data=${PGDATA:?PGDATA is not set}

if [[ ! -s $data/PG_VERSION ]]; then
  password=${POSTGRES_PASSWORD:-}
  if [[ -n ${POSTGRES_PASSWORD_FILE:-} ]]; then
    password=$(<"$POSTGRES_PASSWORD_FILE")
  fi
  if [[ -z $password ]]; then
    echo "postgres-entrypoint: POSTGRES_PASSWORD (or POSTGRES_PASSWORD_FILE) is empty" >&2
    exit 1
  fi
  mkdir -p "$data"
  chmod 0700 "$data"
  pwfile=$(mktemp)
  trap 'rm -f "$pwfile"' EXIT
  printf '%s\n' "$password" >"$pwfile"
  initdb --pgdata="$data" --username="$user" --pwfile="$pwfile" --encoding=UTF8 \
    --locale=C.UTF-8 --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$data/pg_hba.conf"
  if [[ $db != postgres ]]; then
    # Single-user mode: no server, no socket, nothing listening before the database exists.
    echo "CREATE DATABASE \"${db//\"/\"\"}\" OWNER \"${user//\"/\"\"}\";" |
      postgres --single -D "$data" postgres >/dev/null
  fi
  echo "postgres-entrypoint: initialized $data (user $user, database $db)" >&2
fi

exec postgres -D "$data" -c listen_addresses='*' "$@"

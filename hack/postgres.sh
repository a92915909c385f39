#!/usr/bin/env bash
# Starts a throwaway PostgreSQL for the store tests (idempotent: returns at
# once when it already runs) and prints its DSN. Used by `make test` and
# `.ci/run`; tests read the DSN from HOOKKEEPER_TEST_POSTGRES.
set -euo pipefail

PORT="${PGPORT_TEST:-55432}"
DATA="${PGDATA_TEST:-/tmp/hookkeeper-pg-$PORT}"
DSN="postgres://postgres@127.0.0.1:$PORT/postgres?sslmode=disable"

PGBIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)"
if [[ -z "$PGBIN" || ! -x "$PGBIN/postgres" ]]; then
	echo "installing PostgreSQL (Debian package postgresql)" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2 && apt-get install -y -qq postgresql >&2
	PGBIN="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)"
fi

# initdb and postgres refuse to run as root: run them as the postgres user.
as_pg() {
	if [[ "$(id -u)" == "0" ]]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

if "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PORT"; then
	echo "$DSN"
	exit 0
fi

if [[ ! -f "$DATA/PG_VERSION" ]]; then
	mkdir -p "$DATA"
	[[ "$(id -u)" == "0" ]] && chown postgres: "$DATA"
	as_pg "$PGBIN/initdb" -D "$DATA" -U postgres --auth=trust --no-sync -E UTF8 >/dev/null
fi
# fsync stays on: the durability the tests measure must be real.
as_pg "$PGBIN/pg_ctl" -D "$DATA" -l "$DATA/server.log" -w -t 60 start \
	-o "-h 127.0.0.1 -p $PORT -k /tmp -c max_connections=200 -c shared_buffers=256MB" >/dev/null
echo "$DSN"

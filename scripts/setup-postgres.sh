#!/usr/bin/env bash
# setup-postgres.sh: start a throwaway PostgreSQL server on loopback for the
# durable/postgres tests, idempotently.
#
#   eval "$(scripts/setup-postgres.sh)"    # exports GOAI_TEST_POSTGRES
#
# Installs PostgreSQL from Debian if missing, initialises a cluster in
# $GOAI_PG_DIR (default /tmp/goai-pg) owned by the postgres user, starts it on
# 127.0.0.1:$GOAI_PG_PORT (default 55432), creates database $GOAI_PG_DB
# (default goai_test) and prints an `export GOAI_TEST_POSTGRES=...` line on
# stdout. Progress goes to stderr. Running it again reuses the running server.
# Stop it with: su postgres -c "pg_ctl -D /tmp/goai-pg/data stop"
set -euo pipefail

PGDIR=${GOAI_PG_DIR:-/tmp/goai-pg}
PGPORT=${GOAI_PG_PORT:-55432}
PGDB=${GOAI_PG_DB:-goai_test}
PGUSER_RUN=postgres

log() { printf 'setup-postgres: %s\n' "$*" >&2; }

find_bindir() {
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
			printf '%s\n' "$d"
			return 0
		fi
	done
	return 1
}

BINDIR=$(find_bindir || true)
if [ -z "$BINDIR" ]; then
	log "installing postgresql from Debian"
	export DEBIAN_FRONTEND=noninteractive
	if [ "$(id -u)" -ne 0 ]; then
		log "not root: cannot apt-get install postgresql"
		exit 1
	fi
	apt-get update >&2 || true
	apt-get install -y --no-install-recommends postgresql >&2
	BINDIR=$(find_bindir)
fi

as_pg() {
	if [ "$(id -un)" = "$PGUSER_RUN" ]; then
		"$@"
	else
		# runuser keeps working without a login shell or tty (CI, containers).
		runuser -u "$PGUSER_RUN" -- "$@"
	fi
}

if ! id "$PGUSER_RUN" >/dev/null 2>&1; then
	log "creating system user $PGUSER_RUN"
	useradd --system --home-dir /var/lib/postgresql --shell /bin/bash "$PGUSER_RUN"
fi

mkdir -p "$PGDIR"
chown "$PGUSER_RUN": "$PGDIR"
chmod 700 "$PGDIR"
DATA=$PGDIR/data
SOCK=$PGDIR/sock
as_pg mkdir -p "$SOCK"

if [ ! -s "$DATA/PG_VERSION" ]; then
	log "initialising cluster in $DATA"
	as_pg "$BINDIR/initdb" -D "$DATA" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >&2 ||
		as_pg "$BINDIR/initdb" -D "$DATA" -U postgres --auth=trust --encoding=UTF8 --locale=C >&2
fi

if ! as_pg "$BINDIR/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
	log "starting server on 127.0.0.1:$PGPORT"
	as_pg "$BINDIR/pg_ctl" -D "$DATA" -l "$PGDIR/server.log" -w -t 60 start \
		-o "-c listen_addresses=127.0.0.1 -p $PGPORT -k $SOCK -c max_connections=200 -c fsync=on" >&2
fi

# Wait until the server accepts connections.
for _ in $(seq 1 60); do
	if as_pg "$BINDIR/pg_isready" -h 127.0.0.1 -p "$PGPORT" -q; then
		break
	fi
	sleep 0.5
done
as_pg "$BINDIR/pg_isready" -h 127.0.0.1 -p "$PGPORT" >&2

if ! as_pg "$BINDIR/psql" -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres -tAc \
	"SELECT 1 FROM pg_database WHERE datname = '$PGDB'" | grep -q 1; then
	log "creating database $PGDB"
	as_pg "$BINDIR/createdb" -h 127.0.0.1 -p "$PGPORT" -U postgres "$PGDB"
fi

URL="postgres://postgres@127.0.0.1:$PGPORT/$PGDB?sslmode=disable"
log "ready: $URL"
printf "export GOAI_TEST_POSTGRES='%s'\n" "$URL"

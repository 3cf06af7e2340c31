#!/usr/bin/env bash
# setup-redis.sh: start a throwaway Redis server on loopback for the
# middleware/toolcache Redis store tests, idempotently.
#
#   eval "$(scripts/setup-redis.sh)"    # exports GOAI_TEST_REDIS
#
# Installs redis-server from Debian if missing, starts it (no persistence) on
# 127.0.0.1:$GOAI_REDIS_PORT (default 56379) with its files in $GOAI_REDIS_DIR
# (default /tmp/goai-redis) and prints `GOAI_TEST_REDIS=redis://127.0.0.1:PORT`
# on stdout. Progress goes to stderr. Running it again reuses the running
# server. Stop it with: redis-cli -p 56379 shutdown nosave
set -euo pipefail

PORT=${GOAI_REDIS_PORT:-56379}
DIR=${GOAI_REDIS_DIR:-/tmp/goai-redis}

log() { printf 'setup-redis: %s\n' "$*" >&2; }

if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
	if [ "$(id -u)" -ne 0 ]; then
		log "not root: cannot apt-get install redis-server"
		exit 1
	fi
	log "installing redis-server from Debian"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update >&2 || true
	# policy-rc.d keeps the package's own service from starting where that
	# is possible; we run our own instance below either way.
	apt-get install -y --no-install-recommends redis-server redis-tools >&2
fi

ping() { redis-cli -h 127.0.0.1 -p "$PORT" ping 2>/dev/null | grep -q PONG; }

if ! ping; then
	mkdir -p "$DIR"
	log "starting redis-server on 127.0.0.1:$PORT"
	redis-server --bind 127.0.0.1 --port "$PORT" --protected-mode yes \
		--daemonize yes --dir "$DIR" --pidfile "$DIR/redis.pid" --logfile "$DIR/redis.log" \
		--save '' --appendonly no >&2
	for _ in $(seq 1 50); do
		ping && break
		sleep 0.1
	done
	if ! ping; then
		log "redis-server did not answer on port $PORT; see $DIR/redis.log"
		exit 1
	fi
fi

URL="redis://127.0.0.1:$PORT"
log "ready: $URL"
printf 'GOAI_TEST_REDIS=%s\n' "$URL"

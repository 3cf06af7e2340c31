#!/usr/bin/env bash
# M simultaneous streams (default 1,000) through `goai serve` on loopback:
# server peak memory, p99 time to first byte, zero lost or reordered events.
# Builds goai, then runs bench/concurrency (flags pass through, e.g.
# -streams 1000 -deltas 20 -hold 2s -wire agui -store sqlite|none). Stops by itself
# (-timeout, default 120s).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${GOAI_BENCH_OUT:-$(pwd)/bench/out}
mkdir -p "$out"
go build -o "$out/goai" ./cmd/goai
go build -o "$out/concurrency" ./bench/concurrency
# two sockets per stream in this process and the server's
want=$(( ${STREAMS:-1000} * 2 + 256 ))
[ "$(ulimit -n)" -ge "$want" ] || ulimit -n "$want" 2>/dev/null || true
exec "$out/concurrency" -goai "$out/goai" "$@"

#!/usr/bin/env bash
# Scaling curves (bench/README.md has the figures):
#
#   streams   10 -> 10,000 concurrent streams through one server (goai plain,
#             goai durable on SQLite, the reference): each stream's model
#             sends its first token, pauses HOLD ms (all streams open and idle:
#             RSS per idle stream), then TOKENS tokens DELAY ms apart (RSS per
#             active stream from the peak, server CPU per 1,000 events). HOLD
#             (default 15 s) must outlast the spread of the streams' first
#             tokens, or the first streams are active again when the last one
#             opens: at 10,000 streams that spread is 5-8 s here.
#   loglen    one durable log of 1k -> 1M events, SQLite and Postgres: append
#             and replay cost per event (bench/loglen).
#   replicas  1, 2 and 4 `goai serve` replicas on one Postgres: CLIENTS
#             clients spread over the replicas, each run joined from its start
#             on the next replica (-join): throughput and cross-replica
#             delivery latency.
#
# Usage: bench/scaling.sh [streams|loglen|replicas|all]
# env: STREAMS="10 100 1000 10000" KINDS="goai-plain goai-sqlite reference"
#      LOGLEN_SIZES=1000,10000,100000,1000000 PG_LOGLEN_SIZES=1000,10000,100000
#      CLIENTS=200 REPLICAS="1 2 4" TIMEOUT=5m (per streams run) GOAI_BENCH_OUT=dir
#      GOAI=binary (instead of building the working tree's: another commit's,
#      or a `go build -tags pprof` one)
#      PROFILE=seconds (streams, with a -tags pprof GOAI: a CPU profile of each
#      goai server's first seconds, $out/cpu-KIND-STREAMS.pprof)
# Postgres comes from scripts/setup-postgres.sh (database goai_bench).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
what=${1:-all}
out=${GOAI_BENCH_OUT:-$root/bench/out}
mkdir -p "$out"
echo "building goai, bench/load and bench/loglen" >&2
if [ -n "${GOAI:-}" ]; then cp "$GOAI" "$out/goai"; else go build -o "$out/goai" ./cmd/goai; fi
go build -o "$out/load" ./bench/load
go build -o "$out/loglen" ./bench/loglen
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap stop_all EXIT

# start KIND SCENARIO [STORE]: starts one server; appends to pids and urls.
urls=()
start() {
  local kind=$1 sc=$2 store=${3:-} log="$out/scaling-$1-${#pids[@]}.log"
  : >"$log"
  case $kind in
    goai-plain) GOAI_PPROF=${pprof_addr:-} GOAI_MAX_RUNS=0 GOAI_RATE=0 "$out/goai" serve --no-tools --addr 127.0.0.1:0 --store none --model "scripted:$sc" >"$log" 2>&1 & ;;
    goai-sqlite)
      rm -rf "$out/scaling-db" && mkdir -p "$out/scaling-db"
      GOAI_PPROF=${pprof_addr:-} GOAI_MAX_RUNS=0 GOAI_RATE=0 "$out/goai" serve --no-tools --addr 127.0.0.1:0 --store "sqlite:$out/scaling-db/goai.db" --model "scripted:$sc" >"$log" 2>&1 & ;;
    goai-postgres) GOAI_LEASE=15s GOAI_MAX_RUNS=0 GOAI_RATE=0 "$out/goai" serve --no-tools --addr 127.0.0.1:0 --store "$store" --model "scripted:$sc" >"$log" 2>&1 & ;;
    reference)
      [ -f bench/reference/node_modules/@tanstack/ai/package.json ] ||
        (cd bench/reference && npm ci --no-audit --no-fund --loglevel=error)
      node --max-old-space-size=4096 bench/reference/server.mjs "$sc" >"$log" 2>&1 & ;;
  esac
  pids+=($!)
  local u=
  for _ in $(seq 1 300); do
    u=$(grep -o 'serving on http://[^ ]*' "$log" | head -1 | sed 's/serving on //') || true
    [ -n "$u" ] && { urls+=("$u/api/chat"); return 0; }
    sleep 0.1
  done
  echo "$kind did not start:" >&2; cat "$log" >&2; exit 1
}
joined() { local IFS=,; echo "$*"; }

streams_curve() {
  local hold=${HOLD:-15000} tokens=${TOKENS:-40} delay=${DELAY:-50}
  local sc="$out/scaling-streams.json"
  "$out/load" -write-scenario "$sc" -tokens "$tokens" -delay-ms "$delay" -hold-ms "$hold" -tool-every 0
  echo "## streams: first token, ${hold} ms idle, then $tokens tokens ${delay} ms apart"
  printf '| server | streams | RSS base MiB | KiB per idle stream | KiB per active stream (peak) | server CPU ms per 1,000 events | events/s | token p99 ms | TTFB p99 ms | errors | load avg |\n|---|---|---|---|---|---|---|---|---|---|---|\n'
  for n in ${STREAMS:-10 100 1000 10000}; do
    for kind in ${KINDS:-goai-plain goai-sqlite reference}; do
      pids=(); urls=()
      local prof_pid=
      pprof_addr=
      [ -n "${PROFILE:-}" ] && [ "$kind" != reference ] && pprof_addr=127.0.0.1:6061
      start "$kind" "$sc"
      if [ -n "$pprof_addr" ]; then
        curl -s -o "$out/cpu-$kind-$n.pprof" "http://$pprof_addr/debug/pprof/profile?seconds=$PROFILE" &
        prof_pid=$!
      fi
      local wire=agui ramp=0s
      [ "$kind" = reference ] && wire=tanstack
      [ "$n" -ge 1000 ] && ramp=$(( n / 5000 + 1 ))s
      local line
      line=$("$out/load" -url "${urls[0]}" -pid "${pids[0]}" -clients "$n" -tokens "$tokens" -wire "$wire" \
        -ramp "$ramp" -warmup 5 -timeout "${TIMEOUT:-5m}" -json -label "$kind $n" 2>&1) || true
      [ -n "$prof_pid" ] && { wait "$prof_pid" || echo "no profile of $kind $n (a -tags pprof GOAI?)" >&2; }
      stop_all
      node -e '
        let r; try { r = JSON.parse(process.argv[1]) } catch { console.log(`| ${process.argv[2]} | ${process.argv[3]} | failed: ${process.argv[1].slice(0, 200).replace(/\n/g, " ")} |`); process.exit(0) }
        const n = r.clients, t = r.tally
        const idle = (r.server_rss_all_open_kib - r.server_rss_base_kib) / n, act = (r.server_rss_peak_kib - r.server_rss_base_kib) / n
        console.log(`| ${process.argv[2]} | ${n} | ${(r.server_rss_base_kib / 1024).toFixed(1)} | ${idle.toFixed(1)} | ${act.toFixed(1)} | ${(r.server_cpu_s / t.Events * 1e6).toFixed(1)} | ${r.events_per_s.toFixed(0)} | ${r.token_latency_p99_ms.toFixed(1)} | ${r.ttfb_p99_ms.toFixed(1)} | ${t.Failed} failed, ${t.Lost} lost, ${t.Duplicated} dup, ${t.Reordered} reord | ${r.loadavg} |`)' \
        "$line" "$kind" "$n"
    done
  done
}

pg_url() {
  GOAI_PG_DB=goai_bench bash scripts/setup-postgres.sh 2>/dev/null | sed -n 's/^export GOAI_TEST_POSTGRES=//p' | tr -d "'\""
}

loglen_curve() {
  echo "## log length (load avg $(cut -d' ' -f1-3 /proc/loadavg))"
  "$out/loglen" -store sqlite -sizes "${LOGLEN_SIZES:-1000,10000,100000,1000000}"
  local pg; pg=$(pg_url)
  [ -n "$pg" ] && "$out/loglen" -store "$pg" -sizes "${PG_LOGLEN_SIZES:-1000,10000,100000}"
  echo "(load avg at end $(cut -d' ' -f1-3 /proc/loadavg))"
}

replicas_curve() {
  local pg; pg=$(pg_url)
  [ -n "$pg" ] || { echo "no Postgres (scripts/setup-postgres.sh)" >&2; return 1; }
  local clients=${CLIENTS:-200} sc="$out/scaling-replicas.json"
  "$out/load" -write-scenario "$sc" -tokens 200 -delay-ms 10 -tool-every 3
  echo "## replicas on one Postgres: $clients clients, 200 tokens 10 ms apart, each run joined on the next replica"
  printf '| replicas | events/s (first reader) | token p50/p99 ms | joined token p50/p99 ms | joined first token p99 ms | server CPU s (all) | peak RSS MiB (all) | errors | load avg |\n|---|---|---|---|---|---|---|---|---|\n'
  for r in ${REPLICAS:-1 2 4}; do
    pids=(); urls=()
    for _ in $(seq 1 "$r"); do start goai-postgres "$sc" "$pg"; done
    local line
    line=$("$out/load" -url "$(joined "${urls[@]}")" -pid "$(joined "${pids[@]}")" -clients "$clients" -tokens 200 \
      -join -warmup 5 -timeout 5m -json -label "replicas $r" 2>&1) || true
    stop_all
    node -e '
      let r; try { r = JSON.parse(process.argv[1]) } catch { console.log(`| ${process.argv[2]} | failed: ${process.argv[1].slice(0, 200).replace(/\n/g, " ")} |`); process.exit(0) }
      const j = r.join ?? { tally: {} }, t = r.tally
      console.log(`| ${process.argv[2]} | ${r.events_per_s.toFixed(0)} | ${r.token_latency_p50_ms.toFixed(1)}/${r.token_latency_p99_ms.toFixed(1)} | ${(j.token_latency_p50_ms ?? 0).toFixed(1)}/${(j.token_latency_p99_ms ?? 0).toFixed(1)} | ${(j.ttft_p99_ms ?? 0).toFixed(1)} | ${r.server_cpu_s.toFixed(2)} | ${(r.server_rss_peak_kib / 1024).toFixed(1)} | ${t.Failed + (j.tally.Failed ?? 0)} failed, ${t.Lost + (j.tally.Lost ?? 0)} lost | ${r.loadavg} |`)' \
      "$line" "$r"
  done
}

case $what in
  streams) streams_curve ;;
  loglen) loglen_curve ;;
  replicas) replicas_curve ;;
  all) streams_curve; loglen_curve; replicas_curve ;;
  *) echo "usage: bench/scaling.sh [streams|loglen|replicas|all]" >&2; exit 2 ;;
esac

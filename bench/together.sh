#!/usr/bin/env bash
# Two servers measured at the same time, each under its own bench/load
# run, ROUNDS times: both see the same machine at the same moment, so the
# ratio of their server CPU per event holds steady where measurements taken
# one after the other do not (on shared cores one binary measured alone
# varied by half from one minute to the next). The machine is busier than
# with one server, which is the serving load the ratio is about. Prints each
# round and the median ratio B/A of CPU per event, with both sides' token
# latency.
#
# A and B are server kinds as in servers.sh: goai-plain, goai-sqlite,
# goai-memory, reference or floor. A_ENV and B_ENV are VAR=value words for a goai side
# (B_ENV=GOAI_COMMIT_GAP=2ms); A_BIN and B_BIN are goai binaries (default:
# the working tree, built here); A_LOAD_FLAGS and B_LOAD_FLAGS are more
# bench/load flags for one side (B_LOAD_FLAGS=-sorted-ids).
#
# DURATION (a Go duration, e.g. 3s) makes each load start runs until it has
# passed instead of making RUNS runs a client: unpaced, a server twice as
# slow otherwise goes on alone after the other's load has ended, on an idle
# machine, which flatters it; with DURATION the two loads end together.
#
# Usage: bench/together.sh [ROUNDS]
# env: A=goai-plain B=goai-sqlite A_ENV= B_ENV= A_BIN= B_BIN= A_LOAD_FLAGS=
#      B_LOAD_FLAGS= CLIENTS=100
#      RUNS=4 DURATION= DELAY=10 TOKENS=200 GOAI_BENCH_OUT=dir
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
rounds=${1:-5}
kind_a=${A:-goai-plain} kind_b=${B:-goai-sqlite}
clients=${CLIENTS:-100} runs=${RUNS:-4} delay=${DELAY:-10} tokens=${TOKENS:-200} duration=${DURATION:-}
out=${GOAI_BENCH_OUT:-$root/bench/out}
mkdir -p "$out"
command -v node >/dev/null || { echo "together.sh: node is required" >&2; exit 1; }

source bench/servers.sh
pids=()
stop_all() {
  stop_server # a server start_server started but that never served
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  pids=()
}
trap stop_all EXIT

echo "building goai and bench/load" >&2
go build -o "$out/goai" ./cmd/goai
go build -o "$out/load" ./bench/load
bin_a=${A_BIN:-$out/goai} bin_b=${B_BIN:-$out/goai}
want=$(( clients * 6 + 256 ))
[ "$(ulimit -n)" -ge "$want" ] || ulimit -n "$want" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
[[ $kind_a == reference || $kind_b == reference ]] && (cd bench/reference && npm ci --silent >/dev/null)
sc="$out/together-$tokens-$delay.json"
"$out/load" -write-scenario "$sc" -tokens "$tokens" -delay-ms "$delay" -tool-every 3

# start SIDE KIND BIN ENV: one server (servers.sh's start_server, tagged
# with SIDE); sets url_SIDE and pid_SIDE.
start() {
  server_env=$4 start_server "$2" "$sc" "$3" "$1"
  pids+=("$pid")
  printf -v "url_$1" '%s' "$url"
  printf -v "pid_$1" '%s' "$pid"
  pid=
}

# drive SIDE KIND LABEL: bench/load against one side, its JSON to $out.
drive() {
  local side=$1 kind=$2 wire=agui url pid
  [ "$kind" = reference ] && wire=tanstack
  url=url_$side pid=pid_$side
  local flags=${side^^}_LOAD_FLAGS
  # shellcheck disable=SC2086 # the flags are words
  "$out/load" -url "${!url}" -pid "${!pid}" -clients "$clients" -runs "$runs" ${duration:+-duration "$duration"} \
    -tokens "$tokens" -wire "$wire" -warmup 5 -timeout 10m -json ${!flags:-} -label "$3" >"$out/together-$side.json"
}

results="$out/together.jsonl"
: >"$results"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for i in $(seq 1 "$rounds"); do
  start a "$kind_a" "$bin_a" "${A_ENV:-}"
  start b "$kind_b" "$bin_b" "${B_ENV:-}"
  drive a "$kind_a" "A $kind_a ${A_ENV:-}" &
  load_a=$!
  drive b "$kind_b" "B $kind_b ${B_ENV:-}" || { echo "together.sh: the load on B failed" >&2; exit 1; }
  wait "$load_a" || { echo "together.sh: the load on A failed" >&2; exit 1; }
  stop_all
  node -e '
    const fs = require("node:fs")
    const [a, b] = ["a", "b"].map((s) => JSON.parse(fs.readFileSync(`${process.argv[1]}/together-${s}.json`, "utf8")))
    const cpu = (r) => 1e6 * r.server_cpu_s / Math.max(r.tally.Events, 1)
    const show = (r) => `${r.label.trim().padEnd(36)} ${cpu(r).toFixed(1).padStart(6)} us CPU/event in ${r.wall_s.toFixed(1)} s  token p50/p99 ${r.token_latency_p50_ms.toFixed(1)}/${r.token_latency_p99_ms.toFixed(1)} ms` +
      `  lost ${r.tally.Lost} dup ${r.tally.Duplicated} reord ${r.tally.Reordered} err ${r.tally.Failed}` +
      (r.store_commits ? `  ${(r.store_writes / r.store_commits).toFixed(1)} writes/commit` : "")
    console.log(`round ${process.argv[2]}: ${show(a)}\n         ${show(b)}\n         B/A CPU per event ${(cpu(b) / cpu(a)).toFixed(2)}  load ${b.loadavg}`)
    fs.appendFileSync(process.argv[3], JSON.stringify({ a, b, ratio: cpu(b) / cpu(a) }) + "\n")' "$out" "$i" "$results"
done
echo "load average at start: $load0, at end: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
node - "$results" <<'JS'
const fs = require('node:fs')
const rows = fs.readFileSync(process.argv[2], 'utf8').trim().split('\n').map((l) => JSON.parse(l))
const median = (xs) => { const s = [...xs].sort((x, y) => x - y); const n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2 }
const ratios = rows.map((r) => r.ratio)
console.log(`median B/A CPU per event over ${rows.length} rounds: ${median(ratios).toFixed(2)} (range ${Math.min(...ratios).toFixed(2)}-${Math.max(...ratios).toFixed(2)}); ` +
  `token p99 A ${median(rows.map((r) => r.a.token_latency_p99_ms)).toFixed(1)} ms, B ${median(rows.map((r) => r.b.token_latency_p99_ms)).toFixed(1)} ms`)
JS

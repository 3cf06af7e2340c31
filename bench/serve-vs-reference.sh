#!/usr/bin/env bash
# Serving side by side: `goai serve --store none` (plain streaming), the
# reference server (bench/reference/server.mjs: @tanstack/ai 0.58.0,
# toServerSentEventsResponse(chat(...)) over node:http) and `goai serve` with
# its durable SQLite store, each driven by bench/load with the same paced
# scripted model (TOKENS numbered deltas, DELAY ms before each, a tool call
# every third model turn). For each pacing, PAIRS rounds; each round runs the
# three servers one after the other (the order rotates), a fresh server
# process per measurement. Prints every measurement, the medians and the
# ratios goai/reference (throughput, token latency p99, memory per stream).
#
# Usage: bench/serve-vs-reference.sh [CLIENTS] [PAIRS]
# env: DELAYS="0 10 50" TOKENS=200 RUNS=1 (runs per client) GOAI_BENCH_OUT=dir
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
clients=${1:-100}
pairs=${2:-5}
delays=${DELAYS:-0 10 50}
tokens=${TOKENS:-200}
runs=${RUNS:-1}
out=${GOAI_BENCH_OUT:-$root/bench/out}
mkdir -p "$out"
command -v node >/dev/null || { echo "serve-vs-reference.sh: node is required" >&2; exit 1; }
if [ ! -f bench/reference/node_modules/@tanstack/ai/package.json ]; then
  (cd bench/reference && npm ci --no-audit --no-fund --loglevel=error)
fi
echo "building goai and bench/load" >&2
go build -o "$out/goai" ./cmd/goai
go build -o "$out/load" ./bench/load
want=$(( clients * 3 + 256 ))
[ "$(ulimit -n)" -ge "$want" ] || ulimit -n "$want" 2>/dev/null || ulimit -n "$(ulimit -Hn)"

source bench/servers.sh

results="$out/serve-vs-reference.jsonl"
: >"$results"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for d in $delays; do
  sc="$out/load-$tokens-$d.json"
  "$out/load" -write-scenario "$sc" -tokens "$tokens" -delay-ms "$d" -tool-every 3
  for i in $(seq 1 "$pairs"); do
    order=("goai-plain" "reference" "goai-sqlite")
    rot=$(( (i - 1) % 3 ))
    order=("${order[@]:$rot}" "${order[@]:0:$rot}")
    for kind in "${order[@]}"; do
      measure "$kind" "$sc" "$clients" "$kind delay=$d round=$i"
      node -e '
        const r = JSON.parse(process.argv[1]); const t = r.tally
        console.log(`${r.label.padEnd(30)} ${r.events_per_s.toFixed(0).padStart(7)} ev/s  TTFT p99 ${r.ttft_p99_ms.toFixed(1).padStart(7)} ms  ` +
          `token p50/p99/max ${r.token_latency_p50_ms.toFixed(1)}/${r.token_latency_p99_ms.toFixed(1)}/${r.token_latency_max_ms.toFixed(1)} ms  ` +
          `RSS peak ${(r.server_rss_peak_kib / 1024).toFixed(1)} MiB  CPU ${r.server_cpu_s.toFixed(2)} s  ` +
          `lost ${t.Lost} dup ${t.Duplicated} reord ${t.Reordered} err ${t.Failed}  load ${r.loadavg}`)' "$line"
    done
  done
done
echo "load average at start: $load0, at end: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
node - "$results" "$clients" <<'JS'
const fs = require('node:fs')
const [file, clients] = [process.argv[2], Number(process.argv[3])]
const rows = fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l))
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2 }
const by = {}
for (const r of rows) {
  const [kind, delay] = r.label.split(' ')
  ;(by[delay] ??= {})[kind] ??= []
  by[delay][kind].push(r)
}
for (const [delay, kinds] of Object.entries(by)) {
  const m = {}
  for (const [kind, rs] of Object.entries(kinds)) {
    m[kind] = {
      evs: median(rs.map((r) => r.events_per_s)),
      cpu: median(rs.map((r) => r.server_cpu_s)),
      ttft: median(rs.map((r) => r.ttft_p99_ms)),
      p99: median(rs.map((r) => r.token_latency_p99_ms)),
      mem: median(rs.map((r) => (r.server_rss_peak_kib - r.server_rss_base_kib) / clients)),
      evPerCPU: median(rs.map((r) => r.tally.Events / Math.max(r.server_cpu_s, 0.01))),
    }
    const x = m[kind]
    console.log(`median ${clients} clients ${delay} ${kind.padEnd(12)} ${x.evs.toFixed(0)} ev/s, ${x.evPerCPU.toFixed(0)} events per server CPU s, ` +
      `TTFT p99 ${x.ttft.toFixed(1)} ms, token p99 ${x.p99.toFixed(2)} ms, ${x.mem.toFixed(1)} KiB per stream`)
  }
  const r = m.reference
  for (const k of ['goai-plain', 'goai-sqlite']) {
    const g = m[k]
    if (!g || !r) continue
    console.log(`ratio ${delay} ${k}/reference: throughput ${(g.evs / r.evs).toFixed(2)}x, events per CPU s ${(g.evPerCPU / r.evPerCPU).toFixed(1)}x, ` +
      `token p99 ${(g.p99 / r.p99).toFixed(3)}, memory per stream ${(g.mem / r.mem).toFixed(3)}`)
  }
}
JS

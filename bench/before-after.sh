#!/usr/bin/env bash
# goai serve at an earlier commit against the working tree, on the same
# load, alternating (before, after, before, ...) so both see the same
# machine: plain (--store none) and SQLite, each pacing in DELAYS, ROUNDS
# rounds, a fresh server per measurement, driven by bench/load as in
# serve-vs-reference.sh. Prints every measurement and the medians, and the
# ratios after/before of server CPU per event and token latency p99, the
# figures least disturbed by other load on the machine; with both stores,
# also SQLite's CPU per event over plain's for each build (REV may be HEAD
# to measure the working tree's price of durability alone). BEFORE_ENV and
# AFTER_ENV are VAR=value words for each side's server: with REV HEAD they
# compare settings of one build (AFTER_ENV=GOAI_COMMIT_GAP=1ms).
#
# Usage: bench/before-after.sh REV [CLIENTS] [ROUNDS]
# env: DELAYS="0 10 50" STORES="none sqlite" TOKENS=200 RUNS=1 GOAI_BENCH_OUT=dir BEFORE_ENV= AFTER_ENV=
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
rev=${1:?usage: bench/before-after.sh REV [CLIENTS] [ROUNDS]}
clients=${2:-100}
rounds=${3:-3}
delays=${DELAYS:-0 10 50}
stores=${STORES:-none sqlite}
tokens=${TOKENS:-200}
runs=${RUNS:-1}
out=${GOAI_BENCH_OUT:-$root/bench/out}
mkdir -p "$out"
command -v node >/dev/null || { echo "before-after.sh: node is required" >&2; exit 1; }

src=$(mktemp -d)
source bench/servers.sh
trap 'stop_server; rm -rf "$src"' EXIT
echo "building goai at $rev and at the working tree, and bench/load" >&2
git archive "$rev" | tar -x -C "$src"
(cd "$src" && go build -o "$out/goai-before" ./cmd/goai)
go build -o "$out/goai-after" ./cmd/goai
go build -o "$out/load" ./bench/load
want=$(( clients * 3 + 256 ))
[ "$(ulimit -n)" -ge "$want" ] || ulimit -n "$want" 2>/dev/null || ulimit -n "$(ulimit -Hn)"

results="$out/before-after.jsonl"
: >"$results"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for d in $delays; do
  sc="$out/load-$tokens-$d.json"
  "$out/load" -write-scenario "$sc" -tokens "$tokens" -delay-ms "$d" -tool-every 3
  for st in $stores; do
    for i in $(seq 1 "$rounds"); do
      for which in before after; do
        kind=goai-plain; [ "$st" = sqlite ] && kind=goai-sqlite
        server_env=${BEFORE_ENV:-}; [ "$which" = after ] && server_env=${AFTER_ENV:-}
        measure "$kind" "$sc" "$clients" "$which $st delay=$d round=$i" "$out/goai-$which"
        node -e '
          const r = JSON.parse(process.argv[1]); const t = r.tally
          console.log(`${r.label.padEnd(32)} ${r.events_per_s.toFixed(0).padStart(7)} ev/s  CPU ${r.server_cpu_s.toFixed(2)} s  ` +
            `token p50/p99 ${r.token_latency_p50_ms.toFixed(1)}/${r.token_latency_p99_ms.toFixed(1)} ms  ` +
            `lost ${t.Lost} dup ${t.Duplicated} reord ${t.Reordered} err ${t.Failed}  load ${r.loadavg}` +
            (r.store_commits ? `  ${(r.store_writes / r.store_commits).toFixed(1)} writes/commit` : ""))' "$line"
      done
    done
  done
done
echo "load average at start: $load0, at end: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
node - "$results" <<'JS'
const fs = require('node:fs')
const rows = fs.readFileSync(process.argv[2], 'utf8').trim().split('\n').map((l) => JSON.parse(l))
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2 }
const by = {}
for (const r of rows) {
  const [which, store, delay] = r.label.split(' ')
  ;((by[`${store} ${delay}`] ??= {})[which] ??= []).push(r)
}
const medians = {}
for (const [key, w] of Object.entries(by)) {
  const m = {}
  for (const [which, rs] of Object.entries(w)) {
    m[which] = {
      evs: median(rs.map((r) => r.events_per_s)),
      cpuPerK: median(rs.map((r) => 1000 * r.server_cpu_s / Math.max(r.tally.Events, 1))),
      p50: median(rs.map((r) => r.token_latency_p50_ms)),
      p99: median(rs.map((r) => r.token_latency_p99_ms)),
    }
    const x = m[which]
    console.log(`median ${key.padEnd(16)} ${which.padEnd(6)} ${x.evs.toFixed(0)} ev/s, ${(1000 * x.cpuPerK).toFixed(0)} ms server CPU per 1,000 events, token p50/p99 ${x.p50.toFixed(1)}/${x.p99.toFixed(1)} ms`)
  }
  if (m.before && m.after) {
    console.log(`ratio  ${key.padEnd(16)} after/before: CPU per event ${(m.after.cpuPerK / m.before.cpuPerK).toFixed(2)}, ` +
      `token p99 ${(m.after.p99 / m.before.p99).toFixed(2)}, events/s ${(m.after.evs / m.before.evs).toFixed(2)}`)
  }
  medians[key] = m
}
// With both stores measured, the price of durability per build: SQLite's
// CPU per event over plain's at each pacing (the issue's "durable within
// 2x of plain").
for (const key of Object.keys(medians)) {
  const [store, delay] = key.split(' ')
  const plain = medians[`none ${delay}`]
  if (store !== 'sqlite' || !plain) continue
  for (const which of ['before', 'after']) {
    const d = medians[key][which], p = plain[which]
    if (d && p) {
      console.log(`durable/plain ${delay.padEnd(10)} ${which.padEnd(6)} CPU per event ${(d.cpuPerK / p.cpuPerK).toFixed(2)}, ` +
        `events/s ${(d.evs / p.evs).toFixed(2)}, token p99 ${d.p99.toFixed(1)} against ${p.p99.toFixed(1)} ms`)
    }
  }
}
JS

#!/usr/bin/env bash
# Throughput at equal latency: `goai serve --store none` and the reference
# server (bench/reference/server.mjs) under a rising offered load, each point
# measured for both (alternating, a fresh server per measurement, driven by
# bench/load as in serve-vs-reference.sh). A point is CLIENTS:DELAY: that many
# concurrent clients, each streaming runs of TOKENS deltas DELAY ms apart, so
# the offered token rate is CLIENTS*1000/DELAY per second. Each paced
# measurement lasts about TARGET_S seconds if the server keeps up (runs per
# client chosen so, at most MAX_STREAMS streams in all); the unpaced points
# (DELAY 0) make RUNS0 runs per client: with 3, a goai measurement lasted
# under a second and mostly measured the burst of the clients' first
# connects rather than the steady state.
#
# Reports, for each server, the highest events/s it delivers while its token
# latency p99 stays at or under the SLO, and the ratio goai / reference. The
# SLO is SLO_MS milliseconds, or with SLO_MS=ref the reference's own p99 at
# the unpaced point (measured first; with several, the last of them). Token
# latency starts at the model's yield, so a server too busy to run its model
# on time does not show it there: the table also gives the pace the model
# kept (the scenario's delay over the achieved median time between a
# stream's token yields), and a second verdict counts a paced point only if
# the pace kept is at least KEEP_PACE (0.8 by default). A server is not
# driven further up the sweep after two points in a row over the SLO (its
# throughput there does not count, and the reference would take minutes to
# drain 1,000 clients).
#
# Usage: bench/slo.sh
# env: SLO_MS=20 KEEP_PACE=0.8 POINTS="25:0 50:0 100:0 100:10 100:5 100:2 100:1 200:1 300:1 400:1 500:1"
#      ROUNDS=1 TOKENS=200 TARGET_S=2 MAX_STREAMS=1000 RUNS0=30 KINDS="goai-plain reference"
#      (KINDS may add goai-sqlite)
#      GOAI_BENCH_OUT=dir
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
slo=${SLO_MS:-20}
points=${POINTS:-25:0 50:0 100:0 100:10 100:5 100:2 100:1 200:1 300:1 400:1 500:1}
rounds=${ROUNDS:-1}
tokens=${TOKENS:-200}
target_s=${TARGET_S:-2}
max_streams=${MAX_STREAMS:-1000}
runs0=${RUNS0:-30}
kinds=${KINDS:-goai-plain reference}
out=${GOAI_BENCH_OUT:-$root/bench/out}
mkdir -p "$out"
command -v node >/dev/null || { echo "slo.sh: node is required" >&2; exit 1; }
if [[ " $kinds " == *" reference "* && ! -f bench/reference/node_modules/@tanstack/ai/package.json ]]; then
  (cd bench/reference && npm ci --no-audit --no-fund --loglevel=error)
fi
if [ "$slo" = ref ] && [[ " $points " != *":0 "* && "$points" != *":0" ]]; then
  echo "slo.sh: SLO_MS=ref needs an unpaced point (CLIENTS:0) in POINTS" >&2; exit 2
fi
echo "building goai and bench/load" >&2
go build -o "$out/goai" ./cmd/goai
go build -o "$out/load" ./bench/load
maxc=0
for p in $points; do c=${p%%:*}; [ "$c" -gt "$maxc" ] && maxc=$c; done
want=$(( maxc * 3 + 256 ))
[ "$(ulimit -n)" -ge "$want" ] || ulimit -n "$want" 2>/dev/null || ulimit -n "$(ulimit -Hn)"

source bench/servers.sh

# The unpaced points first: with SLO_MS=ref they set the SLO.
ordered=()
for p in $points; do [ "${p#*:}" = 0 ] && ordered+=("$p"); done
for p in $points; do [ "${p#*:}" = 0 ] || ordered+=("$p"); done

results="$out/slo.jsonl"
: >"$results"
declare -A over # kind -> points in a row over the SLO
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for i in $(seq 1 "$rounds"); do
  for k in $kinds; do over[$k]=0; done
  for p in "${ordered[@]}"; do
    c=${p%%:*} d=${p#*:}
    sc="$out/slo-$tokens-$d.json"
    "$out/load" -write-scenario "$sc" -tokens "$tokens" -delay-ms "$d" -tool-every 3
    runs=$runs0
    if [ "$d" -gt 0 ]; then
      runs=$(( (target_s * 1000 + tokens * d - 1) / (tokens * d) ))
      cap=$(( max_streams / c )); [ "$cap" -ge 1 ] || cap=1
      [ "$runs" -le "$cap" ] || runs=$cap
    fi
    # Alternate which server goes first, point after point.
    order=($kinds)
    step=$(( ${step:-0} + 1 ))
    if (( step % 2 == 0 )) && [ ${#order[@]} -gt 1 ]; then order=("${order[1]}" "${order[0]}" "${order[@]:2}"); fi
    for kind in "${order[@]}"; do
      if [ "$d" -gt 0 ] && [ "${over[$kind]}" -ge 2 ]; then
        echo "$kind clients=$c delay=$d: skipped (two points in a row over the SLO)"
        continue
      fi
      measure "$kind" "$sc" "$c" "$kind $c $d $i"
      node -e '
        const r = JSON.parse(process.argv[1]); const t = r.tally
        console.log(`${r.label.padEnd(24)} x${process.argv[2]} runs ${r.events_per_s.toFixed(0).padStart(7)} ev/s  ` +
          `token p50/p99 ${r.token_latency_p50_ms.toFixed(1)}/${r.token_latency_p99_ms.toFixed(1)} ms  ` +
          `CPU server ${r.server_cpu_s.toFixed(2)} s, load generator ${r.loadgen_cpu_s.toFixed(2)} s  ` +
          `lost ${t.Lost} dup ${t.Duplicated} reord ${t.Reordered} err ${t.Failed}  load ${r.loadavg}`)' "$line" "$runs"
      p99=$(node -e 'console.log(JSON.parse(process.argv[1]).token_latency_p99_ms)' "$line")
      if [ "$slo" = ref ] && [ "$d" = 0 ] && [ "$kind" = reference ] && [ "$i" = 1 ]; then
        slo=$p99
        echo "SLO: the reference's unpaced token p99, $slo ms"
      fi
      if [ "$d" -gt 0 ]; then
        if node -e 'process.exit(Number(process.argv[1]) > Number(process.argv[2]) ? 0 : 1)' "$p99" "$slo"; then
          over[$kind]=$(( ${over[$kind]} + 1 ))
        else
          over[$kind]=0
        fi
      fi
    done
  done
done
echo "load average at start: $load0, at end: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
node - "$results" "$slo" "$tokens" "${KEEP_PACE:-0.8}" <<'JS'
const fs = require('node:fs')
const [file, slo, tokens, keepPace] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4]), Number(process.argv[5])]
const rows = fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l))
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2 }
const by = new Map() // "clients delay" -> kind -> rows
for (const r of rows) {
  const [kind, clients, delay] = r.label.split(' ')
  const key = `${clients} ${delay}`
  if (!by.has(key)) by.set(key, {})
  ;(by.get(key)[kind] ??= []).push(r)
}
const kinds = [...new Set(rows.map((r) => r.label.split(' ')[0]))]
console.log(`SLO: token latency p99 <= ${slo} ms (${tokens}-token answers; medians over rounds)`)
console.log(`| clients | pacing | offered tokens/s | ${kinds.map((k) => `${k} events/s | ${k} token p99 ms | ${k} pace kept`).join(' | ')} |`)
console.log(`|---|---|---|${kinds.map(() => '---|---|---|').join('')}`)
const best = {}, bestPaced = {}
for (const [key, ks] of by) {
  const [clients, delay] = key.split(' ').map(Number)
  const offered = delay > 0 ? clients * 1000 / delay : Infinity
  const cells = []
  for (const k of kinds) {
    const rs = ks[k]
    if (!rs) { cells.push('skipped', '–', '–'); continue }
    const evs = median(rs.map((r) => r.events_per_s)), p99 = median(rs.map((r) => r.token_latency_p99_ms))
    const kept = delay > 0 ? median(rs.map((r) => delay / Math.max(r.yield_interval_p50_ms, 1e-9))) : NaN
    const bad = rs.some((r) => r.tally.Failed > 0)
    const ok = p99 <= slo && !bad
    cells.push(evs.toFixed(0), `${p99.toFixed(1)}${ok ? '' : ' ✗'}${bad ? ' (failed streams)' : ''}`,
      delay > 0 ? `${(100 * kept).toFixed(0)} %${kept >= keepPace ? '' : ' ✗'}` : '–')
    if (ok && (!best[k] || evs > best[k].evs)) best[k] = { evs, p99, clients, delay }
    if (ok && delay > 0 && kept >= keepPace && (!bestPaced[k] || evs > bestPaced[k].evs)) bestPaced[k] = { evs, p99, clients, delay }
  }
  console.log(`| ${clients} | ${delay ? delay + ' ms' : 'unpaced'} | ${offered === Infinity ? '∞' : offered.toFixed(0)} | ${cells.join(' | ')} |`)
}
for (const k of kinds) {
  const b = best[k]
  console.log(b ? `${k}: at most ${b.evs.toFixed(0)} events/s within the SLO (${b.clients} clients, ${b.delay ? b.delay + ' ms' : 'unpaced'}, p99 ${b.p99.toFixed(1)} ms)`
    : `${k}: no point within the SLO`)
}
if (best['goai-plain'] && best.reference) {
  console.log(`ratio goai-plain / reference at p99 <= ${slo} ms: ${(best['goai-plain'].evs / best.reference.evs).toFixed(2)}x`)
}
if (best['goai-sqlite'] && best['goai-plain']) {
  console.log(`ratio goai-sqlite / goai-plain at p99 <= ${slo} ms: ${(best['goai-sqlite'].evs / best['goai-plain'].evs).toFixed(2)}x`)
}
for (const k of kinds) {
  const b = bestPaced[k]
  console.log(b ? `${k}, paced points with the model kept at >= ${100 * keepPace} % of its pace: at most ${b.evs.toFixed(0)} events/s (${b.clients} clients, ${b.delay} ms, p99 ${b.p99.toFixed(1)} ms)`
    : `${k}: no paced point within the SLO at >= ${100 * keepPace} % of the model's pace`)
}
if (bestPaced['goai-plain'] && bestPaced.reference) {
  console.log(`ratio goai-plain / reference at p99 <= ${slo} ms, model pace kept: ${(bestPaced['goai-plain'].evs / bestPaced.reference.evs).toFixed(2)}x`)
}
JS

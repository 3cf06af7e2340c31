#!/usr/bin/env bash
# Side-by-side benchmark: `goai run` against the reference engine
# (@tanstack/ai 0.58.0 via conformance/reference/runner.mjs) on the same
# scenario: one turn of N text deltas (default 100,000) through three `noop`
# middleware, SSE written to /dev/null. Whole process each time (scenario
# parsing included), measured with /usr/bin/time -v, alternating the two,
# PAIRS pairs (default 5, at least 5). Prints every run, the medians, and as
# its last line the ratio of wall time and of peak memory.
#
# The reference runner writes as a Node program does (no wait per write, only
# on 'drain'); its time per chunk is printed beside the ratio so a reader can
# check it is not handicapped.
#
# Usage: bench/vs-reference.sh [N] [PAIRS]
# (env: GOAI_BENCH_OUT=dir; REF_RUNNER=path of another runner.mjs to compare)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
n=${1:-100000}
runner=${REF_RUNNER:-conformance/reference/runner.mjs}
pairs=${2:-5}
[ "$pairs" -ge 5 ] || { echo "vs-reference.sh: PAIRS must be at least 5" >&2; exit 2; }
out=${GOAI_BENCH_OUT:-$root/bench/out}
mkdir -p "$out"

if [ ! -x /usr/bin/time ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing GNU time from Debian" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null
  else
    echo "vs-reference.sh: /usr/bin/time (Debian package 'time') is required" >&2; exit 1
  fi
fi
command -v node >/dev/null || { echo "vs-reference.sh: node is required" >&2; exit 1; }
if [ ! -f conformance/reference/node_modules/@tanstack/ai/package.json ]; then
  (cd conformance/reference && npm ci --no-audit --no-fund --loglevel=error)
fi

echo "building goai" >&2
go build -o "$out/goai" ./cmd/goai

scenario="$out/deltas-$n.json"
node - "$n" "$scenario" <<'JS'
const [n, file] = [Number(process.argv[2]), process.argv[3]]
const m = 'scripted-1'
const turn = [
  { type: 'RUN_STARTED', runId: 'run-1', threadId: 'thread-bench', model: m },
  { type: 'TEXT_MESSAGE_START', messageId: 'msg_1', role: 'assistant', model: m },
]
for (let i = 0; i < n; i++) turn.push({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'msg_1', delta: `tok${i} `, model: m })
turn.push({ type: 'TEXT_MESSAGE_END', messageId: 'msg_1', model: m })
turn.push({ type: 'RUN_FINISHED', runId: 'run-1', threadId: 'thread-bench', model: m, finishReason: 'stop',
  usage: { promptTokens: 10, completionTokens: n, totalTokens: n + 10 } })
const sc = { name: `bench-${n}-deltas`, threadId: 'thread-bench', runId: 'run-1',
  messages: [{ role: 'user', content: 'stream a lot' }], tools: [], middleware: ['noop', 'noop', 'noop'], turns: [turn] }
require('node:fs').writeFileSync(file, JSON.stringify(sc))
JS
echo "scenario: $scenario ($(du -h "$scenario" | cut -f1), $n deltas, middleware noop x3)" >&2

# measure LABEL CMD...: runs CMD with stdout to a file, prints "wall_s rss_kib"
measure() {
  local label=$1; shift
  local tf="$out/time-$label.txt" so="$out/stdout-$label.sse"
  /usr/bin/time -v "$@" >"$so" 2>"$tf" || { echo "$label failed:" >&2; tail -5 "$tf" >&2; exit 1; }
  local deltas
  deltas=$(grep -c '"TEXT_MESSAGE_CONTENT"' "$so" || true)
  if [ "$deltas" != "$n" ]; then
    echo "$label wrote $deltas TEXT_MESSAGE_CONTENT events, want $n" >&2; exit 1
  fi
  local wall rss cpu
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }' "$tf")
  rss=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$tf")
  cpu=$(awk -F': ' '/User time \(seconds\)|System time \(seconds\)/ { s += $2 } END { print s }' "$tf")
  echo "$wall $rss $cpu"
}

median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

load0=$(cut -d' ' -f1-3 /proc/loadavg)
g_wall=(); g_rss=(); r_wall=(); r_rss=(); g_cpu=(); r_cpu=()
for i in $(seq 1 "$pairs"); do
  # alternate which one goes first
  for who in $( [ $((i % 2)) = 1 ] && echo "goai ref" || echo "ref goai" ); do
    if [ "$who" = goai ]; then
      read -r w r c < <(measure goai "$out/goai" run --scenario "$scenario")
      g_wall+=("$w"); g_rss+=("$r"); g_cpu+=("$c")
    else
      read -r w r c < <(measure ref node "$runner" "$scenario")
      r_wall+=("$w"); r_rss+=("$r"); r_cpu+=("$c")
    fi
    printf 'pair %d %-4s  wall %6.2f s  cpu %6.2f s  peak RSS %7.1f MiB\n' "$i" "$who" "$w" "$c" "$(echo "$r" | awk '{ print $1 / 1024 }')"
  done
done

gw=$(printf '%s\n' "${g_wall[@]}" | median); gr=$(printf '%s\n' "${g_rss[@]}" | median)
rw=$(printf '%s\n' "${r_wall[@]}" | median); rr=$(printf '%s\n' "${r_rss[@]}" | median)
gc=$(printf '%s\n' "${g_cpu[@]}" | median); rc=$(printf '%s\n' "${r_cpu[@]}" | median)
echo "load average at start: $load0, at end: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
awk -v gw="$gw" -v gr="$gr" -v rw="$rw" -v rr="$rr" -v gc="$gc" -v rc="$rc" -v n="$n" -v p="$pairs" 'BEGIN {
  printf "median of %d pairs, %d deltas: goai %.3f s wall %.3f s cpu %.1f MiB | reference %.3f s wall %.3f s cpu %.1f MiB\n", p, n, gw, gc, gr / 1024, rw, rc, rr / 1024
  gw1 = (gw > 0) ? gw : 0.005
  printf "per chunk (wall / deltas): goai %.2f us, reference %.2f us; CPU per chunk: goai %.2f us, reference %.2f us\n", gw / n * 1e6, rw / n * 1e6, gc / n * 1e6, rc / n * 1e6
  gc1 = (gc > 0) ? gc : 0.005
  printf "ratio: CPU time goai/reference = %.4f (%.1fx less; the fairer figure when the machine is loaded)\n", gc / rc, rc / gc1
  printf "ratio: wall time goai/reference = %.4f (%.1fx faster), peak memory goai/reference = %.4f (%.1fx less)\n", gw / rw, rw / gw1, gr / rr, rr / gr
}'

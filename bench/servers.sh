# Sourced by the serving benchmarks (serve-vs-reference.sh, slo.sh,
# before-after.sh, together.sh): start_server starts a server, and measure
# runs one at a time with one bench/load run against it (together.sh runs
# two at once, tagged apart, and stops them itself). Needs $out (bench/load built as $out/load) and the caller's
# cwd at the repository root.

pid=
stop_server() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; fi
}
trap stop_server EXIT

# start_server KIND SCENARIO [GOAI] [TAG]: starts one server (goai-plain,
# goai-sqlite, goai-memory: durable on the in-process store, reference, or
# floor: bench/floor, the least a server can do; goai is the binary GOAI, default $out/goai) on a
# free loopback port running SCENARIO; sets pid and url. A goai server also
# gets the VAR=value words in $server_env (e.g. GOAI_COMMIT_GAP=1ms). TAG
# names its log and database apart from another server's of the same kind
# and binary running at the same time.
start_server() {
  local kind=$1 sc=$2 bin=${3:-$out/goai} tag=${4:+-$4}
  local log="$out/server-$kind-${bin##*/}$tag.log" db="$out/db-${bin##*/}$tag"
  : >"$log"
  case $kind in
    goai-plain) env ${server_env:-} GOAI_MAX_RUNS=0 GOAI_RATE=0 "$bin" serve --no-tools --addr 127.0.0.1:0 --store none --model "scripted:$sc" >"$log" 2>&1 & ;;
    goai-sqlite)
      rm -rf "$db" && mkdir -p "$db"
      env ${server_env:-} GOAI_MAX_RUNS=0 GOAI_RATE=0 "$bin" serve --no-tools --addr 127.0.0.1:0 --store "sqlite:$db/goai.db" --model "scripted:$sc" >"$log" 2>&1 & ;;
    goai-memory) env ${server_env:-} GOAI_MAX_RUNS=0 GOAI_RATE=0 "$bin" serve --no-tools --addr 127.0.0.1:0 --store memory --model "scripted:$sc" >"$log" 2>&1 & ;;
    reference) node bench/reference/server.mjs "$sc" >"$log" 2>&1 & ;;
    floor)
      go build -o "$out/floor" ./bench/floor
      "$out/floor" -scenario "$sc" >"$log" 2>&1 & ;;
    *) echo "unknown server kind $kind" >&2; exit 2 ;;
  esac
  pid=$!
  for _ in $(seq 1 300); do
    url=$(grep -o 'serving on http://[^ ]*' "$log" | head -1 | sed 's/serving on //') || true
    [ -n "$url" ] && { url="$url/api/chat"; return 0; }
    sleep 0.1
  done
  echo "$kind did not start:" >&2; cat "$log" >&2; exit 1
}

# measure KIND SCENARIO CLIENTS LABEL [GOAI]: a fresh server, one bench/load
# run of CLIENTS clients ($runs runs each, $tokens tokens, 5 warm-up runs)
# against it, the server stopped; sets line to the JSON result and appends
# it to $results.
measure() {
  local kind=$1 sc=$2 clients=$3 label=$4 wire=agui
  start_server "$kind" "$sc" "${5:-}"
  [ "$kind" = reference ] && wire=tanstack
  line=$("$out/load" -url "$url" -pid "$pid" -clients "$clients" -runs "$runs" -tokens "$tokens" \
    -wire "$wire" -warmup 5 -timeout 10m -json -label "$label") || {
    echo "$kind: load run failed: $line" >&2; stop_server; exit 1; }
  stop_server
  echo "$line" >>"$results"
}

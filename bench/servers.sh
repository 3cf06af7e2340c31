# Sourced by the serving benchmarks: start_server and stop_server for one
# server process at a time. Needs $out (built goai in $out/goai) and the
# caller's cwd at the repository root.

pid=
stop_server() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; fi
}
trap stop_server EXIT

# start_server KIND SCENARIO: starts one server (goai-plain, goai-sqlite or
# reference) on a free loopback port running SCENARIO; sets pid and url.
start_server() {
  local kind=$1 sc=$2 log="$out/server-$1.log"
  : >"$log"
  case $kind in
    goai-plain) GOAI_MAX_RUNS=0 GOAI_RATE=0 "$out/goai" serve --no-tools --addr 127.0.0.1:0 --store none --model "scripted:$sc" >"$log" 2>&1 & ;;
    goai-sqlite)
      rm -rf "$out/db" && mkdir -p "$out/db"
      GOAI_MAX_RUNS=0 GOAI_RATE=0 "$out/goai" serve --no-tools --addr 127.0.0.1:0 --store "sqlite:$out/db/goai.db" --model "scripted:$sc" >"$log" 2>&1 & ;;
    reference) node bench/reference/server.mjs "$sc" >"$log" 2>&1 & ;;
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

#!/usr/bin/env bash
# Sets up everything the tests need (idempotently) and runs every test.
# Usage: ./scripts/test.sh [extra go test flags]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
# go.mod names the toolchain (with the standard library's security fixes);
# "auto" lets the go command fetch it through the module proxy.
export GOTOOLCHAIN=auto

log() { printf '\n== %s\n' "$*"; }

need_apt=()
command -v git >/dev/null || need_apt+=(git)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  need_apt+=(nodejs npm)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  log "installing ${need_apt[*]} from Debian"
  if [ "$(id -u)" != 0 ]; then
    echo "scripts/test.sh: need root to install ${need_apt[*]}; install them and rerun" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
command -v node >/dev/null || { echo "scripts/test.sh: Node.js is required for the conformance tests (the real TanStack and AG-UI clients); install Node 20" >&2; exit 1; }

# Optional service setups, one script per need. Each prints KEY=VALUE lines
# to export (for example GOAI_TEST_POSTGRES).
for setup in scripts/setup-*.sh; do
  [ -f "$setup" ] || continue
  log "$setup"
  while IFS= read -r line; do
    case "$line" in
      export\ *=*) eval "$line" ;;
      [A-Z_]*=*) export "${line?}" ;;
    esac
  done < <(bash "$setup")
done

log "npm ci (pinned reference and client packages)"
# Every directory with a committed package-lock.json is a pinned npm tree.
for dir in $(git ls-files '*package-lock.json' 2>/dev/null | xargs -r -n1 dirname || echo conformance/reference); do
  if [ -f "$dir/package-lock.json" ]; then
    stamp="$dir/node_modules/.goai-lock"
    if [ ! -f "$stamp" ] || ! cmp -s "$dir/package-lock.json" "$stamp"; then
      (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
      cp "$dir/package-lock.json" "$stamp"
    fi
  fi
done

log "gofmt, go vet, staticcheck, govulncheck"
./scripts/lint.sh

log "go test -race ./..."
go test -race -count=1 -timeout 40m "$@" ./...

# Measurements the race detector's instrumentation would distort (the
# stacks of waiting streams: server/stack_test.go) run without it.
log "go test (without -race): stack measurements"
go test -count=1 -timeout 5m -run 'TestWaitingStreamsKeepSmallStacks' ./server

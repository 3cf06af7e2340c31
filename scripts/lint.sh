#!/usr/bin/env bash
# Static checks that fail the test run on any finding: gofmt, go vet,
# staticcheck and govulncheck. The tools come through the Go module proxy at
# pinned versions. govulncheck reads a vulnerability database built locally
# from the golang.org/x/vulndb module (the public database's own host is not
# reachable from these machines); set GOAI_VULNDB to reuse a built one.
set -euo pipefail
export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
cd "$(dirname "$0")/.."

staticcheck_version=v0.8.2
govulncheck_version=v1.9.0
vulndb_version=v0.0.0-20261105234957-e22db6528018

bin=$(go env GOPATH)/bin
tools_stamp="$bin/.goai-tools-$staticcheck_version-$govulncheck_version"
if [ ! -f "$tools_stamp" ]; then
  go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version"
  go install "golang.org/x/vuln/cmd/govulncheck@$govulncheck_version"
  touch "$tools_stamp"
fi

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path '*/node_modules/*'))
if [ -n "$unformatted" ]; then
  echo "gofmt needed on:" $unformatted >&2
  exit 1
fi
go vet ./...
"$bin/staticcheck" ./...

db=${GOAI_VULNDB:-$(go env GOCACHE)/goai-vulndb-$vulndb_version}
if [ ! -f "$db/index/db.json" ]; then
  src=$(go mod download -json "golang.org/x/vulndb@$vulndb_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  rm -rf "$db.tmp"
  go run "golang.org/x/vulndb/cmd/indexdb@$vulndb_version" -vulns "$src/data/osv" -out "$db.tmp"
  mv "$db.tmp" "$db"
fi
"$bin/govulncheck" -db "file://$db" ./...

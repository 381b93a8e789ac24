#!/usr/bin/env bash
# The test command (README, CI): formatting, vet, race-enabled tests against
# real mosquitto brokers, and a short fuzz run of every fuzz target from its
# seed corpus.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2; echo "$unformatted" >&2; exit 1
fi
go vet ./...
go test -race -count=1 -timeout 15m ./...

# Fuzz briefly: each target for FUZZTIME (seed corpora already ran above).
fuzztime=${FUZZTIME:-5s}
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
    echo "fuzz $pkg $target ($fuzztime)"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >/tmp/eddy-fuzz.log 2>&1 || { cat /tmp/eddy-fuzz.log; exit 1; }
  done
done
echo "all tests passed"

#!/usr/bin/env bash
# The test command (README, CI): formatting, vet, race-enabled tests against
# real mosquitto brokers, a non-race pass of the tests the race build leaves
# out, and a short fuzz run of every fuzz target from its
# seed corpus; the release builds for every target, run under qemu-user
# (ARM) and held to the footprint budgets (RELEASE.md).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

# Release binaries (dist/), then the footprint budgets on the native one in
# the background while the rest runs: the quickstart's peak RSS needs 60 s of
# wall time but little CPU. Its result is checked (and fails the run) at the end.
bash scripts/build.sh
footprint_log=$(mktemp)
EDDY_DIST=dist go test -count=1 -v -timeout 5m -run '^TestBudget_' ./scripts/footprint/ >"$footprint_log" 2>&1 &
footprint_pid=$!
trap 'kill "$footprint_pid" 2>/dev/null || true' EXIT

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2; echo "$unformatted" >&2; exit 1
fi
go vet ./...
# Static analysis (scripts/gotool.sh builds the pinned version once).
"$(bash scripts/gotool.sh staticcheck)" ./...
# The e2e package (the real binary: crash, outage and example runs) is the
# longest; the bound leaves a slower run room, not a hung one. Its parallel
# tests (e2e/harness_test.go) mostly wait on child processes, brokers and
# fsync (a file-source crash subtest uses about 0.4 of a core over its
# run), so 4 of them share the 2 cores; only the e2e package and the
# footprint package (skipped here) have parallel tests.
go test -race -count=1 -parallel 4 -timeout 25m ./...

# The tests the race build leaves out, without -race: heap, RSS and
# allocation figures, which the race detector distorts (it makes sync.Pool
# drop items and doubles memory), live in test files tagged
# `//go:build !race`, and only there (a t.Skip under the race detector would
# hide a test from CI). Every Test function of those files runs here, found
# by the tag, so a new one needs no edit of this script.
if grep -rnE --include='*_test.go' 'race\.Enabled|raceEnabled' .; then
  echo "a test skips itself under the race detector: move it into a //go:build !race file instead" >&2; exit 1
fi
norace_dirs=$(grep -rl --include='*_test.go' '^//go:build !race$' . | xargs -r -n1 dirname | sort -u)
for dir in $norace_dirs; do
  tests=$(grep -l '^//go:build !race$' "$dir"/*_test.go | xargs grep -ho '^func Test[A-Za-z0-9_]*' | sed 's/^func //' | paste -sd'|')
  if [ -n "$tests" ]; then
    echo "non-race: $dir ($tests)"
    go test -count=1 -timeout 15m -v -run "^($tests)\$" "$dir" | grep -E '^(=== RUN|--- |ok|FAIL|panic)|_test\.go:[0-9]+:'
  fi
done

# ARM under qemu-user (no binfmt_misc here, so the emulator is named): the
# release binaries run version, validate and a real job through a SIGKILL,
# and restore each other's checkpoints across armv7/arm64/amd64; then the
# state and checkpoint tests as 32-bit armv7 (no race detector on arm; serial,
# as bbolt's mmaps crowd a 32-bit address space).
EDDY_DIST=dist go test -count=1 -v -timeout 10m ./scripts/qemu/ >/tmp/eddy-qemu.log 2>&1 \
  || { cat /tmp/eddy-qemu.log; exit 1; }
grep -E '^ *--- |^ok' /tmp/eddy-qemu.log
GOARCH=arm GOARM=7 CGO_ENABLED=0 go test -exec 'qemu-arm -cpu cortex-a7' -count=1 -p 1 -parallel 1 -timeout 10m ./state/ ./checkpoint/

# Fuzz briefly: each target for FUZZTIME (seed corpora already ran above).
fuzztime=${FUZZTIME:-5s}
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
    echo "fuzz $pkg $target ($fuzztime)"
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >/tmp/eddy-fuzz.log 2>&1; then
      # Go 1.26's fuzz coordinator can report a bare "context deadline
      # exceeded" when -fuzztime ends while a worker is mid-input
      # (golang/go#75804, fixed in 1.27): no input failed. Anything else,
      # or a written failing input, fails the run.
      if grep -q 'context deadline exceeded' /tmp/eddy-fuzz.log && ! grep -qE 'Failing input written|panic:' /tmp/eddy-fuzz.log \
        && [ "$(grep -c -- '--- FAIL' /tmp/eddy-fuzz.log)" = 1 ] && ! grep -qE '^\s+[a-z_]+_test\.go:[0-9]+:' /tmp/eddy-fuzz.log; then
        echo "  (fuzz coordinator deadline race, golang/go#75804: no failing input)"
      else
        cat /tmp/eddy-fuzz.log; exit 1
      fi
    fi
  done
done

# The footprint budgets started at the top (RELEASE.md).
if ! wait "$footprint_pid"; then
  cat "$footprint_log"; echo "footprint budget check failed" >&2; exit 1
fi
trap - EXIT
grep 'FIGURE' "$footprint_log" | sed 's/^ *[a-z_]*\.go:[0-9]*: FIGURE /footprint: /'
rm -f "$footprint_log"
echo "all tests passed"

#!/usr/bin/env bash
# Runs the suite's main benchmarks in turn (about 9 minutes) and prints
# their tables; carry each target's figure and the date this prints into
# its row of BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
go build -o "${TMPDIR:-/tmp}/eddybench" ./scripts/bench/eddybench
echo "date: $(date -u +%Y-%m-%d)  commit: $(git rev-parse --short HEAD)  machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/{print $2}') GiB"
for b in inprocess e2e "footprint -sinks file,mqtt" checkpoint restore shared; do
  # shellcheck disable=SC2086
  "${TMPDIR:-/tmp}/eddybench" $b
done

#!/usr/bin/env bash
# SD-card wear: bytes an agent writes to storage per hour at 1,000
# readings/s with checkpoints every 10 s (see wear_test.go).
#
#   bash scripts/footprint/wear.sh [SECONDS]    # default 300
#   EDDY_WEAR_FILES=1 bash scripts/footprint/wear.sh 120   # also bytes per file (perf, root)
#
# Builds the native release binary if dist/ lacks it. TMPDIR must be on a
# disk-backed file system (not tmpfs), since the agent's data_dir goes there.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-300}
[ -x dist/eddy-linux-amd64 ] || bash scripts/build.sh linux/amd64
EDDY_DIST=dist EDDY_WEAR_SECONDS=$secs go test -count=1 -v -timeout $((5 * secs + 400))s -run '^TestWear_' ./scripts/footprint/ | grep -E 'FIGURE|FAIL|ok|panic'

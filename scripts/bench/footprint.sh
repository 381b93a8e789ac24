#!/usr/bin/env bash
# (c) Agent CPU %, peak RSS, RSS trend and bytes written per minute (in all and
# per file class) at 10,000 readings/s for 60 s (~70 s per sink; -sinks
# file,mqtt adds the WAL sink). The long-run workload with frequent
# checkpoints: -window 10s -out-of-orderness 2s -checkpoint-interval 1s
# -duration 10m.
# Prints a Markdown table on stdout (progress on stderr). Flags go to
# eddybench: scripts/bench/footprint.sh -h lists them.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec go run ./scripts/bench/eddybench footprint "$@"

#!/usr/bin/env bash
# (c) Agent CPU %, peak RSS and bytes written per minute at 10,000 readings/s for 60 s (~70 s per sink; -sinks file,mqtt adds the WAL sink).
# Prints a Markdown table on stdout (progress on stderr). Flags go to
# eddybench: scripts/bench/footprint.sh -h lists them.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec go run ./scripts/bench/eddybench footprint "$@"

#!/usr/bin/env bash
# (d) Checkpoint duration and size at 10k, 100k and 1M keys (~1-2 min).
# Prints a Markdown table on stdout (progress on stderr). Flags go to
# eddybench: scripts/bench/checkpoint.sh -h lists them.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec go run ./scripts/bench/eddybench checkpoint "$@"

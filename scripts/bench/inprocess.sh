#!/usr/bin/env bash
# (a) In-process readings/s of filter, tumbling, sliding and session pipelines on JSON input (~20 s).
# Prints a Markdown table on stdout (progress on stderr). Flags go to
# eddybench: scripts/bench/inprocess.sh -h lists them.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec go run ./scripts/bench/eddybench inprocess "$@"

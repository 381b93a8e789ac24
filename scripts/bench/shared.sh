#!/usr/bin/env bash
# Ingest over 1..4 shared-subscription connections (connections = N) vs the plain MQTT source (~75 s).
# Prints a Markdown table on stdout (progress on stderr). Flags go to
# eddybench: scripts/bench/shared.sh -h lists them.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec go run ./scripts/bench/eddybench shared "$@"

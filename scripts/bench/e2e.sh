#!/usr/bin/env bash
# (b) End to end through mosquitto and the real binary: readings/s and p50/p99 latency, exactly-once and at-least-once file sinks, next to a raw paho subscriber (~2 min).
# Prints a Markdown table on stdout (progress on stderr). Flags go to
# eddybench: scripts/bench/e2e.sh -h lists them.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec go run ./scripts/bench/eddybench e2e "$@"

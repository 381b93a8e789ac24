#!/usr/bin/env bash
# (e) Restore time from a local S3 server (versitygw on loopback, built into
# ~/.cache/eddy/bin when missing) at 10k, 100k and 1M keys (~5-10 min).
# Prints a Markdown table on stdout (progress on stderr). Flags go to
# eddybench: scripts/bench/restore_s3.sh -h lists them.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec go run ./scripts/bench/eddybench restore-s3 "$@"

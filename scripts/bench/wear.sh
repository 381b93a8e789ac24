#!/usr/bin/env bash
# (f) SD-card wear and uplink volume at 1M keys with 1% of them changed per
# checkpoint: bytes written per hour by file class and bytes uploaded to a
# local S3 server (versitygw), for a full snapshot every 10 checkpoints
# and a whole copy of the state in the working file (before), compaction by
# size (max_chain_ratio, default 1.5) with that copy (copy), and the defaults, which
# read misses from the checkpoint files (after). Loads
# the state once (~1 min), then runs each policy for whole cycles of at
# least 30 checkpoints, one per second, scaled to one per 10 s (~5-10 min);
# -interval 10s -duration 10m runs at the real interval instead. The bytes
# written are split by file: increments, new bases (full or merged), ingest
# log, the bbolt working file, manifests and temporary files, the rest.
# TMPDIR must be on a disk-backed file system. Flags go to eddybench:
# scripts/bench/wear.sh -h lists them.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec go run ./scripts/bench/eddybench wear "$@"

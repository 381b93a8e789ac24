#!/usr/bin/env bash
# Builds versitygw (Apache-2.0), the real S3 server Eddy's upload tests run
# against, into the cache directory when it is missing, and prints the binary's
# path on stdout. Idempotent: a cached binary is reused (the first build takes
# about two minutes). Cache: ${EDDY_CACHE:-$HOME/.cache/eddy}/bin.
set -euo pipefail

version=v1.8.0
bin_dir="${EDDY_CACHE:-$HOME/.cache/eddy}/bin"
bin="$bin_dir/versitygw"
stamp="$bin_dir/versitygw.version"

if [ -x "$bin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$bin_dir"
# Build into a temp dir and rename, so a build interrupted half-way (or two
# tests building at once) never leaves a truncated binary at $bin.
tmp=$(mktemp -d "$bin_dir/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "versitygw.sh: building versitygw $version into $bin_dir (about 2 minutes)" >&2
# Outside any module, so the project's go.mod is neither read nor changed.
(cd "$tmp" && GOFLAGS=-mod=mod GOBIN="$tmp" CGO_ENABLED=0 GOWORK=off \
  go install "github.com/versity/versitygw/cmd/versitygw@$version") >&2
mv -f "$tmp/versitygw" "$bin"
echo "$version" > "$stamp.tmp" && mv -f "$stamp.tmp" "$stamp"
echo "$bin"

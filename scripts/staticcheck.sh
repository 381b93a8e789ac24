#!/usr/bin/env bash
# Builds staticcheck (MIT), the static analyser scripts/test.sh runs after
# go vet, into the cache directory when it is missing, and prints the binary's
# path on stdout. Pinned, so a new release's checks never fail an unchanged
# tree; idempotent: a cached binary of the pinned version is reused.
# Cache: ${EDDY_CACHE:-$HOME/.cache/eddy}/bin.
set -euo pipefail

version=v0.8.2
bin_dir="${EDDY_CACHE:-$HOME/.cache/eddy}/bin"
bin="$bin_dir/staticcheck"
stamp="$bin_dir/staticcheck.version"

if [ -x "$bin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$bin_dir"
# Build into a temp dir and rename, so a build interrupted half-way (or two
# runs building at once) never leaves a truncated binary at $bin.
tmp=$(mktemp -d "$bin_dir/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "staticcheck.sh: building staticcheck $version into $bin_dir" >&2
# Outside any module, so the project's go.mod is neither read nor changed.
(cd "$tmp" && GOFLAGS=-mod=mod GOBIN="$tmp" CGO_ENABLED=0 GOWORK=off \
  go install "honnef.co/go/tools/cmd/staticcheck@$version") >&2
mv -f "$tmp/staticcheck" "$bin"
echo "$version" > "$stamp.tmp" && mv -f "$stamp.tmp" "$stamp"
echo "$bin"

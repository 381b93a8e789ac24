#!/usr/bin/env bash
# Builds a pinned Go tool the tests need into the cache directory when it is
# missing, and prints the binary's path on stdout:
#
#   bash scripts/gotool.sh versitygw     # the S3 server of the upload tests (Apache-2.0)
#   bash scripts/gotool.sh staticcheck   # the static analyser scripts/test.sh runs (MIT)
#
# Pinned, so a new release never changes an unchanged tree's results;
# idempotent: a cached binary of the pinned version is reused (a first build
# takes a minute or two). Cache: ${EDDY_CACHE:-$HOME/.cache/eddy}/bin.
set -euo pipefail

case ${1:-} in
  versitygw) pkg=github.com/versity/versitygw/cmd/versitygw version=v1.8.0 ;;
  staticcheck) pkg=honnef.co/go/tools/cmd/staticcheck version=v0.8.2 ;;
  *) echo "gotool.sh: usage: gotool.sh versitygw|staticcheck" >&2; exit 2 ;;
esac
name=$1
bin_dir="${EDDY_CACHE:-$HOME/.cache/eddy}/bin"
bin="$bin_dir/$name"
stamp="$bin_dir/$name.version"

if [ -x "$bin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$bin_dir"
# Build into a temp dir and rename, so a build interrupted half-way (or two
# tests building at once) never leaves a truncated binary at $bin.
tmp=$(mktemp -d "$bin_dir/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "gotool.sh: building $name $version into $bin_dir" >&2
# Outside any module, so the project's go.mod is neither read nor changed.
(cd "$tmp" && GOFLAGS=-mod=mod GOBIN="$tmp" CGO_ENABLED=0 GOWORK=off \
  go install "$pkg@$version") >&2
mv -f "$tmp/$name" "$bin"
echo "$version" > "$stamp.tmp" && mv -f "$stamp.tmp" "$stamp"
echo "$bin"

#!/usr/bin/env bash
# Release build: static, stripped eddy binaries for the devices Eddy targets,
# written to dist/ (or $DIST) with a SHA256SUMS file, and a Debian package
# and a tarball of each (scripts/package/package.sh).
#
#   bash scripts/build.sh                 # all four targets
#   bash scripts/build.sh linux/arm64     # only the named targets
#
# Targets are GOOS/GOARCH[/GOARM]: linux/amd64, linux/arm64, linux/arm/7
# (Raspberry Pi 2+, armv7 gateways) and linux/arm/6 (Pi Zero/1). Binaries are
# named eddy-linux-amd64, eddy-linux-arm64, eddy-linux-armv7, eddy-linux-armv6.
#
# CGO_ENABLED=0 makes them static (no libc on the device to match);
# -trimpath drops build paths; -s -w drops the symbol table and DWARF. The
# version is `git describe --tags --always --dirty` and the commit
# `git rev-parse --short HEAD`; without git (a source tarball) they fall back
# to $EDDY_VERSION / $EDDY_COMMIT, else "dev" / "unknown". SOURCE_DATE_EPOCH
# is not needed: with -trimpath and no cgo the build is reproducible for a
# given Go version.
set -euo pipefail
cd "$(dirname "$0")/.."

dist=${DIST:-dist}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(linux/amd64 linux/arm64 linux/arm/7 linux/arm/6)

version=${EDDY_VERSION:-}
commit=${EDDY_COMMIT:-}
if [ -z "$version" ]; then
  version=$(git describe --tags --always --dirty 2>/dev/null || true)
  version=${version:-dev}
fi
if [ -z "$commit" ]; then
  commit=$(git rev-parse --short HEAD 2>/dev/null || true)
  commit=${commit:-unknown}
fi
ldflags="-s -w -X main.version=${version} -X main.commit=${commit}"

mkdir -p "$dist"
names=()
for t in "${targets[@]}"; do
  IFS=/ read -r goos goarch goarm <<<"$t"
  name="eddy-${goos}-${goarch}"
  if [ "$goarch" = arm ]; then
    goarm=${goarm:-7}
    name="eddy-${goos}-armv${goarm}"
  elif [ -n "$goarm" ]; then
    echo "build: $t: a GOARM level only applies to arm" >&2; exit 2
  fi
  CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch GOARM=$goarm \
    go build -trimpath -ldflags "$ldflags" -o "$dist/$name" .
  names+=("$name")
done

# SHA256SUMS covers every binary in dist/, so a partial rebuild keeps the
# others' sums current.
(cd "$dist" && sha256sum eddy-linux-* >SHA256SUMS)
for n in "${names[@]}"; do
  printf 'build: %-20s %9d bytes  %s\n' "$n" "$(stat -c %s "$dist/$n")" "$version"
done

# Debian packages and tarballs of the same binaries.
EDDY_VERSION=$version bash scripts/package/package.sh "$dist" "${names[@]}"

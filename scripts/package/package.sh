#!/usr/bin/env bash
# Packages release binaries from scripts/build.sh for installation on a
# device:
#
#   bash scripts/package/package.sh DIST NAME...   # e.g. dist eddy-linux-arm64
#
# For each binary NAME in DIST it writes
#   DIST/eddy_VERSION_ARCH.deb        a Debian package (dpkg-deb; no other tool)
#   DIST/eddy-VERSION-linux-ARCH.tar.gz   the same files for other systems,
#                                     installed with scripts/install.sh inside
#
# Debian architectures: amd64, arm64, armhf (the armv7 build: Debian and
# Raspberry Pi OS on Pi 2 and later) and, for Raspberry Pi OS on a Pi Zero or
# Pi 1 (armhf there means ARMv6), the armv6 build as eddy_VERSION_armhf-armv6.deb.
# Debian's armel is ARMv5 without a floating-point unit, which the armv6
# build needs, so there is no armel package.
#
# The package holds /usr/bin/eddy, the unit /lib/systemd/system/eddy.service,
# the configuration template /etc/eddy/eddy.hcl (a conffile: an upgrade never
# overwrites an edited one) and the maintainer scripts beside this file
# (postinst creates the eddy system user and /var/lib/eddy and says how to
# start the service; it does not start it).
#
# VERSION is $EDDY_VERSION, else `git describe`; a Debian version must start
# with a digit: anything but a dotted release number becomes 0~g<it>
# (sorting before any release).
set -euo pipefail
cd "$(dirname "$0")/../.."

dist=$1; shift
version=${EDDY_VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
version=${version#v}
[[ $version =~ ^[0-9]+\.[0-9] ]] || version="0~g${version}"
version=${version//-/+} # "1.2.0-3-gabc" → "1.2.0+3+gabc": no Debian revision

for name in "$@"; do
  case $name in
    eddy-linux-amd64) arch=amd64 file=eddy_${version}_amd64 tarch=amd64 ;;
    eddy-linux-arm64) arch=arm64 file=eddy_${version}_arm64 tarch=arm64 ;;
    eddy-linux-armv7) arch=armhf file=eddy_${version}_armhf tarch=armv7 ;;
    eddy-linux-armv6) arch=armhf file=eddy_${version}_armhf-armv6 tarch=armv6 ;;
    *) echo "package: no package for $name" >&2; continue ;;
  esac
  tree=$(mktemp -d)
  trap 'rm -rf "$tree"' EXIT
  install -D -m 0755 "$dist/$name" "$tree/usr/bin/eddy"
  install -D -m 0644 scripts/systemd/eddy.service "$tree/lib/systemd/system/eddy.service"
  install -D -m 0644 examples/eddy.hcl "$tree/etc/eddy/eddy.hcl"
  install -D -m 0644 README.md "$tree/usr/share/doc/eddy/README.md"
  install -d "$tree/DEBIAN"
  for s in postinst prerm postrm; do install -m 0755 "scripts/package/$s" "$tree/DEBIAN/$s"; done
  echo /etc/eddy/eddy.hcl >"$tree/DEBIAN/conffiles"
  size_kib=$(du -sk --exclude=DEBIAN "$tree" | cut -f1)
  cat >"$tree/DEBIAN/control" <<CONTROL
Package: eddy
Version: $version
Architecture: $arch
Maintainer: Eddy developers <eddy@localhost>
Installed-Size: $size_kib
Depends: passwd
Section: net
Priority: optional
Homepage: https://github.com/eddy-edge/eddy
Description: edge stream agent: MQTT in, event-time windows, exactly-once delivery
 Eddy reads sensor streams from MQTT, computes event-time windows over them
 with Apache Flink's semantics, keeps its state in checkpoints (optionally in
 S3, so a replaced device restores) and delivers the results upstream
 exactly once, buffering on disk while the uplink is down.
CONTROL
  dpkg-deb --root-owner-group -Zgzip --build "$tree" "$dist/$file.deb" >/dev/null
  echo "package: $dist/$file.deb"

  # The tarball: what scripts/install.sh needs, at the paths it uses.
  tdir=$tree/tar/eddy-$version-linux-$tarch
  install -D -m 0755 "$dist/$name" "$tdir/dist/$name"
  install -D -m 0755 scripts/install.sh "$tdir/scripts/install.sh"
  install -D -m 0644 scripts/systemd/eddy.service "$tdir/scripts/systemd/eddy.service"
  install -D -m 0644 examples/eddy.hcl "$tdir/examples/eddy.hcl"
  install -D -m 0644 README.md "$tdir/README.md"
  tar -C "$tree/tar" --owner=0 --group=0 -czf "$dist/eddy-$version-linux-$tarch.tar.gz" "eddy-$version-linux-$tarch"
  echo "package: $dist/eddy-$version-linux-$tarch.tar.gz"
  rm -rf "$tree"
  trap - EXIT
done

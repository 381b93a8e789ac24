#!/usr/bin/env bash
# Installs Eddy as a systemd service on systems without dpkg (Debian and
# Raspberry Pi OS: use the .deb from scripts/build.sh). The same layout as the
# package: the binary, the configuration template, the unit, the eddy system
# user. From a release tarball (scripts/package/package.sh) or a checkout:
#
#   sudo bash scripts/install.sh [--binary FILE] [--config FILE] [--start]
#   DESTDIR=/tmp/root PREFIX=/usr bash scripts/install.sh   # stage into a tree
#
# Places
#   $DESTDIR$PREFIX/bin/eddy                (PREFIX defaults to /usr/local)
#   $DESTDIR/etc/eddy/eddy.hcl              only if absent: an existing config is
#                                           kept, the new one goes to eddy.hcl.new
#   $DESTDIR/etc/systemd/system/eddy.service  (binary path rewritten for PREFIX)
#
# --binary defaults to dist/eddy-linux-<this machine's arch> from
# scripts/build.sh, checked against dist/SHA256SUMS when that is present.
# --config defaults to the template examples/eddy.hcl (readings from the
# device's broker, one event-time window, results on disk), to be edited.
# The config is validated with the binary when it runs here, and so is an
# existing one against the state in its data_dir: a binary that would not
# start on them is not installed.
# systemd-analyze verify checks the unit when it is installed (a warning
# fails the install). Without DESTDIR it creates the eddy system user and,
# on a machine running systemd, reloads systemd; it starts eddy only with
# --start (write the config first; it says how).
set -euo pipefail
cd "$(dirname "$0")/.."

binary= config= start=0
while [ $# -gt 0 ]; do
  case $1 in
    --binary) binary=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --start) start=1; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "install: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
destdir=${DESTDIR:-}
prefix=${PREFIX:-/usr/local}

if [ -z "$binary" ]; then
  case $(uname -m) in
    x86_64) arch=amd64 ;;
    aarch64|arm64) arch=arm64 ;;
    armv7l|armv8l) arch=armv7 ;;
    armv6l) arch=armv6 ;;
    *) echo "install: no release build for $(uname -m); pass --binary" >&2; exit 1 ;;
  esac
  binary=dist/eddy-linux-$arch
  [ -f "$binary" ] || { echo "install: $binary missing: run scripts/build.sh first" >&2; exit 1; }
  if [ -f dist/SHA256SUMS ]; then
    (cd dist && grep " eddy-linux-$arch\$" SHA256SUMS | sha256sum -c --quiet -) \
      || { echo "install: $binary does not match dist/SHA256SUMS" >&2; exit 1; }
  fi
fi
[ -f "$binary" ] || { echo "install: binary $binary not found" >&2; exit 1; }

bin="$destdir$prefix/bin/eddy"
conf_dir="$destdir/etc/eddy"
new=$(mktemp)
trap 'rm -f "$new"' EXIT
cp "${config:-examples/eddy.hcl}" "$new"
# Validate with the new binary before it replaces anything, when it runs on
# this machine (not an ARM binary staged on amd64). The config the service
# will run (an existing one is kept, else the new one) is also checked
# against the checkpoints in its data_dir (where the config points, read
# only), as a restart onto the new binary would meet them; a new config
# that only lands beside it as eddy.hcl.new is checked alone (--no-state).
# A refusal installs nothing, so the old binary keeps running and starting.
if "$binary" version >/dev/null 2>&1; then
  if [ -e "$conf_dir/eddy.hcl" ]; then
    "$binary" validate --no-state -c "$new" >/dev/null || { echo "install: the config does not validate (above)" >&2; exit 1; }
    "$binary" validate -c "$conf_dir/eddy.hcl" >&2 \
      || { echo "install: the new binary would not start on $conf_dir/eddy.hcl and its state (above); nothing installed" >&2; exit 1; }
  else
    "$binary" validate -c "$new" >/dev/null || { echo "install: the config does not validate (above)" >&2; exit 1; }
  fi
fi

install -D -m 0755 "$binary" "$bin"
echo "install: $bin"

# The config: the user's, or the template.
install -d -m 0755 "$conf_dir"
if [ -e "$conf_dir/eddy.hcl" ]; then
  install -m 0644 "$new" "$conf_dir/eddy.hcl.new"
  echo "install: kept $conf_dir/eddy.hcl; the new config is $conf_dir/eddy.hcl.new"
else
  install -m 0644 "$new" "$conf_dir/eddy.hcl"
  echo "install: $conf_dir/eddy.hcl"
fi

# The unit, with ExecStart and ExecStartPre pointing at the installed binary.
unit="$destdir/etc/systemd/system/eddy.service"
install -d -m 0755 "$(dirname "$unit")"
sed "s#/usr/bin/eddy#$prefix/bin/eddy#g" scripts/systemd/eddy.service >"$new"
install -m 0644 "$new" "$unit"
echo "install: $unit"

if command -v systemd-analyze >/dev/null 2>&1; then
  # verify checks that ExecStart's binary exists, so a staged unit is
  # verified as a copy pointing into DESTDIR. It exits 0 on unknown keys and
  # bad values (it only warns), so any output is a failure.
  check=$unit
  if [ -n "$destdir" ]; then
    check_dir=$(mktemp -d)
    trap 'rm -f "$new"; rm -rf "$check_dir"' EXIT
    check=$check_dir/eddy.service
    sed "s#$prefix/bin/eddy#$bin#g" "$unit" >"$check"
  fi
  if ! out=$(systemd-analyze verify "$check" 2>&1) || [ -n "$out" ]; then
    echo "$out" >&2; echo "install: systemd-analyze verify rejected $unit" >&2; exit 1
  fi
  echo "install: systemd-analyze verify passed"
else
  echo "install: systemd-analyze not found; unit not verified"
fi

# The service's user (the unit's User=), on the system itself only.
if [ -z "$destdir" ] && ! id eddy >/dev/null 2>&1; then
  useradd --system --user-group --home-dir /var/lib/eddy --no-create-home \
    --shell /usr/sbin/nologin --comment "Eddy edge stream agent" eddy
  echo "install: created the eddy system user"
fi

if [ -z "$destdir" ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload
  if [ "$start" = 1 ]; then
    systemctl enable --now eddy.service
    echo "install: eddy enabled and started; journalctl -u eddy -f shows its log"
    exit 0
  fi
fi
echo "install: edit /etc/eddy/eddy.hcl, then: eddy validate -c /etc/eddy/eddy.hcl && systemctl daemon-reload && systemctl enable --now eddy"

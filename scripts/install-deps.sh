#!/usr/bin/env bash
# Installs what Eddy's tests need beyond Go: mosquitto (the real broker the
# integration tests run against) and chromium (the headless browser the status
# page test drives). Idempotent; runs apt-get only when something is missing.
set -euo pipefail

need=()
command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || need+=(mosquitto)
# qemu-user runs the ARM release builds (scripts/qemu, scripts/test.sh).
{ command -v qemu-aarch64 && command -v qemu-arm; } >/dev/null 2>&1 || need+=(qemu-user)
command -v chromium >/dev/null 2>&1 || need+=(chromium)

if [ ${#need[@]} -gt 0 ]; then
  echo "install-deps: installing ${need[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# The Debian package starts a system broker on :1883; tests never use it
# (they start their own on free loopback ports), so leave it alone.

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
# rabbitmq-server (with its MQTT plugin) is the broker that downgrades QoS 2
# to QoS 1 in the sink's tests (scripts/rabbitmq).
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || need+=(rabbitmq-server)

if [ ${#need[@]} -gt 0 ]; then
  echo "install-deps: installing ${need[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# The Debian packages start a system mosquitto on :1883 and a system
# RabbitMQ (where a service manager runs); tests never use them (they start
# their own on free loopback ports), so leave them alone.

# aedes, the Node.js MQTT broker (scripts/aedes), on Debian's nodejs: pinned by
# scripts/aedes/package-lock.json, installed into a cache folder outside the
# repository ($EDDY_AEDES_DIR, default ~/.cache/eddy/aedes) whenever the
# version there is not the pinned one.
node_need=()
{ command -v node || command -v nodejs; } >/dev/null 2>&1 || node_need+=(nodejs)
command -v npm >/dev/null 2>&1 || node_need+=(npm)
if [ ${#node_need[@]} -gt 0 ]; then
  echo "install-deps: installing ${node_need[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${node_need[@]}" >/dev/null
fi
scripts_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# npm_pinned NAME PACKAGE DIR installs scripts/NAME's package.json and
# package-lock.json into DIR with npm ci unless DIR holds PACKAGE at the
# version package.json pins.
npm_pinned() {
  local src="$scripts_dir/$1" pkg=$2 dir=$3 want have
  want=$(sed -n "s/.*\"$pkg\": *\"\\([^\"]*\\)\".*/\\1/p" "$src/package.json" | head -1)
  have=$(sed -n 's/^[[:space:]]*"version": *"\([^"]*\)".*/\1/p' "$dir/node_modules/$pkg/package.json" 2>/dev/null | head -1 || true)
  if [ "$have" != "$want" ]; then
    echo "install-deps: installing $pkg $want into $dir" >&2
    mkdir -p "$dir"
    cp "$src/package.json" "$src/package-lock.json" "$dir/"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
}
npm_pinned aedes aedes "${EDDY_AEDES_DIR:-$HOME/.cache/eddy/aedes}"

# MQTT.js, the independent MQTT 5 client (scripts/mqttjs), the same way:
# pinned by its package-lock.json, installed into $EDDY_MQTTJS_DIR (default
# ~/.cache/eddy/mqttjs).
npm_pinned mqttjs mqtt "${EDDY_MQTTJS_DIR:-$HOME/.cache/eddy/mqttjs}"

# sparkplug-payload, Cirrus Link's Sparkplug B codec (scripts/sparkplugjs),
# the same way: pinned by its package-lock.json, installed into
# $EDDY_SPARKPLUGJS_DIR (default ~/.cache/eddy/sparkplugjs).
npm_pinned sparkplugjs sparkplug-payload "${EDDY_SPARKPLUGJS_DIR:-$HOME/.cache/eddy/sparkplugjs}"

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
aedes_src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/aedes"
aedes_dir="${EDDY_AEDES_DIR:-$HOME/.cache/eddy/aedes}"
want=$(sed -n 's/.*"aedes": *"\([^"]*\)".*/\1/p' "$aedes_src/package.json" | head -1)
have=$(sed -n 's/^[[:space:]]*"version": *"\([^"]*\)".*/\1/p' "$aedes_dir/node_modules/aedes/package.json" 2>/dev/null | head -1 || true)
if [ "$have" != "$want" ]; then
  echo "install-deps: installing aedes $want into $aedes_dir" >&2
  mkdir -p "$aedes_dir"
  cp "$aedes_src/package.json" "$aedes_src/package-lock.json" "$aedes_dir/"
  (cd "$aedes_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi

# MQTT.js, the independent MQTT 5 client (scripts/mqttjs), the same way:
# pinned by its package-lock.json, installed into $EDDY_MQTTJS_DIR (default
# ~/.cache/eddy/mqttjs).
mqttjs_src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/mqttjs"
mqttjs_dir="${EDDY_MQTTJS_DIR:-$HOME/.cache/eddy/mqttjs}"
want=$(sed -n 's/.*"mqtt": *"\([^"]*\)".*/\1/p' "$mqttjs_src/package.json" | head -1)
have=$(sed -n 's/^[[:space:]]*"version": *"\([^"]*\)".*/\1/p' "$mqttjs_dir/node_modules/mqtt/package.json" 2>/dev/null | head -1 || true)
if [ "$have" != "$want" ]; then
  echo "install-deps: installing mqtt (MQTT.js) $want into $mqttjs_dir" >&2
  mkdir -p "$mqttjs_dir"
  cp "$mqttjs_src/package.json" "$mqttjs_src/package-lock.json" "$mqttjs_dir/"
  (cd "$mqttjs_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi

# sparkplug-payload, Cirrus Link's Sparkplug B codec (scripts/sparkplugjs),
# the same way: pinned by its package-lock.json, installed into
# $EDDY_SPARKPLUGJS_DIR (default ~/.cache/eddy/sparkplugjs).
spjs_src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/sparkplugjs"
spjs_dir="${EDDY_SPARKPLUGJS_DIR:-$HOME/.cache/eddy/sparkplugjs}"
want=$(sed -n 's/.*"sparkplug-payload": *"\([^"]*\)".*/\1/p' "$spjs_src/package.json" | head -1)
have=$(sed -n 's/^[[:space:]]*"version": *"\([^"]*\)".*/\1/p' "$spjs_dir/node_modules/sparkplug-payload/package.json" 2>/dev/null | head -1 || true)
if [ "$have" != "$want" ]; then
  echo "install-deps: installing sparkplug-payload $want into $spjs_dir" >&2
  mkdir -p "$spjs_dir"
  cp "$spjs_src/package.json" "$spjs_src/package-lock.json" "$spjs_dir/"
  (cd "$spjs_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi

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

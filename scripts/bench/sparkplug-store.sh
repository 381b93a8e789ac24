#!/usr/bin/env bash
# Sparkplug sink store and forward: the bytes a held result takes in the
# sink's log on disk and the cost of holding it, and the rate at which
# 100,000 held results are published as historical after the primary
# host comes online, through a mosquitto of its own (~10 s). Prints a
# Markdown table on stdout (go test's output on stderr).
set -euo pipefail
if [[ ${1:-} == -h ]]; then
	echo "usage: $0   (no flags)"
	exit 0
fi
cd "$(dirname "$0")/../.."
out=$(go test -count=1 -run '^$' -bench 'StoreHold|ReplayHeld' -benchtime 1x ./operators/io/sparkplug/ | tee /dev/stderr)
hold=$(go test -count=1 -run '^$' -bench 'StoreHold' -benchtime 1000000x ./operators/io/sparkplug/ | tee /dev/stderr)
metric() { # metric OUTPUT BENCHMARK UNIT: the value go test reported
	awk -v b="$2" -v u="$3" '$1 ~ "^Benchmark"b"(-[0-9]+)?$" { for (i = 2; i < NF; i++) if ($(i+1) == u) print $i }' <<<"$1"
}
echo "| figure | value |"
echo "|---|---|"
echo "| on disk per held result (4 aggregates, 50 keys) | $(metric "$hold" StoreHold disk-bytes/result) bytes |"
echo "| held results appended per CPU-second (batches of 100, unsynced) | $(metric "$hold" StoreHold results/cpu-s) ($(metric "$hold" StoreHold allocs/op) allocations each) |"
for v in 4 5; do
	echo "| replay after the births, MQTT $v: held results published | $(metric "$out" "ReplayHeld/mqtt$v" published/s) per second, $(metric "$out" "ReplayHeld/mqtt$v" published/cpu-s) per CPU-second |"
	echo "| replay, MQTT $v: received by a QoS 0 subscriber through mosquitto | $(metric "$out" "ReplayHeld/mqtt$v" received) of 100000, $(metric "$out" "ReplayHeld/mqtt$v" received/s) per second |"
done

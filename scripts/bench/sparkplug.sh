#!/usr/bin/env bash
# Sparkplug B: bytes per window result on the wire (Sparkplug DDATA at
# QoS 0 against the MQTT sink's JSON at QoS 2, the whole MQTT exchange),
# and the DDATA encode and decode rates per CPU-second, also as a
# sparkplug_b source reads it (~12 s). Prints a
# Markdown table on stdout (go test's output on stderr).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(go test -count=1 -run '^$' -bench 'EncodeDData|DecodeDData|ReaderDData' -benchtime 2s ./operators/io/sparkplug/ | tee /dev/stderr)
metric() { # metric BENCHMARK UNIT: the value go test reported
  awk -v b="$1" -v u="$2" '$1 ~ "^Benchmark"b"(-[0-9]+)?$" { for (i = 2; i < NF; i++) if ($(i+1) == u) print $i }' <<<"$out"
}
sp=$(metric EncodeDData sparkplug-bytes/result)
js=$(metric EncodeDData json-bytes/result)
spw=$(metric EncodeDData sparkplug-wire-bytes/result)
jsw=$(metric EncodeDData json-qos2-wire-bytes/result)
echo "| figure | value |"
echo "|---|---|"
echo "| payload per result (4 aggregates): Sparkplug DDATA / JSON | $sp / $js bytes |"
echo "| on the wire per result: Sparkplug QoS 0 PUBLISH / JSON QoS 2 exchange | $spw / $jsw bytes ($(awk -v a="$spw" -v b="$jsw" 'BEGIN { printf "%.2f", a / b }')×) |"
echo "| DDATA encoded per CPU-second | $(metric EncodeDData results/cpu-s) results |"
echo "| DDATA decoded per CPU-second | $(metric DecodeDData readings/cpu-s) readings |"
echo "| DDATA read by a host's Reader per CPU-second | $(metric ReaderDData readings/cpu-s) readings |"
echo "| DDATA read by a sparkplug_b source (Reader, each reading as the JSON the pipeline reads) per CPU-second | $(metric ReaderDDataJSON readings/cpu-s) readings |"

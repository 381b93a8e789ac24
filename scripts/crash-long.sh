#!/usr/bin/env bash
# The long crash tests: 200,000 readings at QoS 1 from 1,000 devices through
# a real mosquitto, the agent SIGKILLed 10 times; and 1,200,000 readings from
# a file, SIGKILLed 10 times per pipeline; committed output compared with an
# uninterrupted run (see crash_mqtt_test.go and crash_test.go); and 200,000
# readings at 10,000/s through aedes, SIGKILLed 5 times, whose resumed
# sessions send their backlog behind live readings (crash_aedes_test.go).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
EDDY_CRASH_LONG=1 go test -count=1 -timeout 30m -run 'TestCrash_' -v . 2>&1 | grep -v '^=== \|Warning: Mosquitto'

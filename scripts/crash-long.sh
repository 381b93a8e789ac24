#!/usr/bin/env bash
# The long crash tests (EDDY_CRASH_LONG=1), each comparing committed or
# delivered output with an uninterrupted run:
#   - TestCrash_MQTTExactlyOnce: 200,000 readings at QoS 1 from 1,000 devices
#     through a real mosquitto, the agent SIGKILLed 10 times;
#   - TestCrash_MQTTStarvedCPU: 1,000,000 readings at 20,000/s from 1,000
#     devices through Debian's mosquitto tuned as the README says
#     (max_inflight_messages 1000, max_queued_messages 1000000, persistence),
#     both cores kept busy by spinning processes for the whole run, the agent
#     SIGKILLed 20 times, the upstream broker restarted 6 times, results
#     delivered upstream by the exactly-once MQTT sink, and no loss of the
#     source's connection but to the kills;
#   - TestCrash_AedesResumedBacklogLate and ...Hold: 200,000 readings at
#     10,000/s through aedes, SIGKILLed 5 times, whose resumed sessions send
#     their backlog behind live readings, judged against a packet trace of
#     what aedes itself lost or sent again after an ack it read, the Hold
#     test holding for 10 s (e2e/crash_aedes_test.go; a loaded aedes sends
#     its backlog up to a minute late); TestCrash_AedesRedeliveries keeps its one
#     size (30,000 readings at 1,000/s, 5 kills, acks lost before each);
#   - TestCrash_RabbitMQSource: 200,000 readings at QoS 1 from 1,000 devices
#     through RabbitMQ 3.10's MQTT plugin (mqtt.prefetch = 1000), the agent
#     SIGKILLed 10 times, 100 of its acks lost with each killed process;
#   - the WAL sink's and the file source's crash tests (e2e/crash_wal_test.go,
#     e2e/crash_test.go: 1,200,000 readings from a file, SIGKILLed 10 times per
#     pipeline);
#   - TestCrash_WALSinkExactlyOnce/aedes and /embedded: the exactly-once
#     sink's kill test (200,000 readings, SIGKILLed 11 times, two upstream
#     restarts and a 30 s outage) against aedes and against a second agent's
#     embedded broker, which lose their sessions when restarted: each repeat
#     proven a restarted broker's (e2e/crash_wal_upstreams_test.go).
# CI runs smaller variants of each (TestCrash_MQTTStarvedCPU: 200,000
# readings through scripts/faultbroker, which re-sends a DUP block of
# 100,000 acknowledged messages after one kill).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
EDDY_CRASH_LONG=1 go test -count=1 -timeout 30m -run 'TestCrash_' -v ./e2e/ 2>&1 | grep -v '^=== \|Warning: Mosquitto'

// Package e2e holds the black-box tests: each builds the real eddy binary
// (harness_test.go), starts it against real counterparts (mosquitto,
// aedes, RabbitMQ, versitygw, a small mounted file system) and judges it
// only by what it writes, logs and serves, as an operator would.
//
// The tests run from the repository's top, so examples/ and testdata paths
// read as the docs write them. Files are grouped by the prefix of their
// names:
//
//	harness_     starting, stopping and watching eddy; the packet-tracing proxy
//	crash_       SIGKILL at random moments against each broker family, results
//	             compared with an uninterrupted run
//	checkpoint_  restore, corrupt checkpoints, restart strategies, unaligned barriers,
//	             an upgrade from the build of an earlier commit
//	delivery_    the sinks: the WAL sink's exactly-once and at-least-once modes,
//	             refusals, drains, probes, dead letters
//	disk_        full disks and disk budgets
//	keyed_       the per-key operators (alarm, absence, dedup, report by exception)
//	pipeline_    end-to-end results and the window conformance cases
//	upload_      S3 shipping, credentials, restore on a replacement device
//	security_    the admin endpoint's guards, broker TLS, limits against a hostile LAN
//	cli_         the commands, the examples, the quickstart, reloads
//
// `go test ./e2e/` runs the CI size of every test; scripts/crash-long.sh
// the long crash and soak forms.
package e2e

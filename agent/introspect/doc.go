// Package introspect is the running agent as the admin endpoint sees it:
// View implements admin.Agent (reports, readiness, savepoint trigger), times
// how long MQTT sources on outside brokers stay disconnected, and registers
// the metrics derived from the agent's state (watermark lag, dropped
// readings, parallelism, state sizes, consecutive checkpoint failures,
// eddy_ready, eddy_clock_synchronized).
//
// It is handed, when the agent is built, a Setup of plain values fixed for
// the run (device id, metric set, pipelines with their counters, the
// configured sources, sinks and upload destination), and a Running that
// reads what changes (ingest logs, WAL refusals, uploads, disk, checkpoints,
// restart limits, clock) and triggers savepoints. It never sees the agent
// itself.
//
// Guarantees:
//   - Every admin.Agent method is safe for concurrent use, and so are the
//     gauges RegisterMetrics adds; each reads Setup and Running when called,
//     so nothing is computed between requests or scrapes.
//   - Nothing in the agent changes but by Savepoint, and RegisterMetrics
//     (also called by Listen) adds gauges to its metric set, idempotently.
//     The only state of its own is when it first saw each tracked source
//     disconnected, updated by every report, every readiness check and,
//     while Listen's endpoint runs, a sample every second.
//   - Readiness (what /readyz answers) is decided by evaluateReadiness, a
//     pure function of the samples: the rules are in its doc.
//   - Lists are in configuration order (pipelines, WALs) or sorted by name
//     (sources, ingest logs); empty lists in Report encode as [].
package introspect

package agent

import (
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"

	"github.com/eddy-edge/eddy/agent/disk"
	"github.com/eddy-edge/eddy/agent/stages"
	"github.com/eddy-edge/eddy/checkpoint"
	"github.com/eddy-edge/eddy/config"
	"github.com/eddy-edge/eddy/operators/io/broker"
	"github.com/eddy-edge/eddy/operators/io/ingest"
	"github.com/eddy-edge/eddy/operators/io/source"
	"github.com/eddy-edge/eddy/operators/io/sparkplug"
	"github.com/eddy-edge/eddy/state"
)

// dataflow is the job graph a configuration opened: the embedded broker,
// the sources, sinks and pipelines, and what they keep on disk (state
// backends, ingest logs, WALs). It opens them (pipeline_open.go,
// source_open.go, sink_open.go, broker.go), connecting each pipeline to the
// sources and sinks it shares with others; it tells when they have drained
// and waits for the WAL sinks' delivery (drain.go), sends unaligned
// barriers ahead (announce) and trims the ingest logs (truncateIngest).
// The agent runs and checkpoints what it holds; a region restart replaces
// parts of it (newPipeline under mu).
type dataflow struct {
	// What opening needs, set once by build.
	cfg        *config.Config
	src        []byte // the configuration's text (state shapes compare expressions by it)
	deviceID   string
	log        *slog.Logger
	metrics    *metrics.Set
	clk        clock
	stateCache int64 // state { cache } (memoryBudget), shared by the stateful subtasks
	// oldSubtasks are the stateful subtasks of the old definitions that
	// run beside their new ones (rollovers): they share the state budget
	// with the configuration's (stateSubtasks).
	oldSubtasks int
	stdout      io.Writer   // where stdout sinks write
	fail        func(error) // stops the run (Agent.fail) until failover routes a region's own
	holds       *disk.Holds // the ingest intakes wait for disk space there

	broker *broker.Broker // nil until a source or sink uses it
	// mu guards pipelines, sources and sinks, which a region restart
	// replaces while the admin endpoint reads them.
	mu          sync.Mutex
	sources     map[string]*sourceRunner
	sinks       map[string]*sinkRunner
	pipelines   []*stages.Pipeline
	sims        []*source.Simulator
	pipeMetrics map[string]*stages.Metrics // kept across region restarts
	walSinks    map[string]*walHolder      // kept across region restarts
	// sparkplugSinks: the current Sparkplug sink of each name, which a
	// region restart replaces, for its metrics registered once.
	sparkplugSinks map[string]*atomic.Pointer[sparkplug.Sink]
	// rebirthers ask Sparkplug edge nodes for their births, one per
	// source with request_rebirth; kept across region restarts.
	rebirthers map[string]*lazyRebirther
	backends   []state.Backend
	// deadProducers is each pipeline's count of dead-letter producers
	// (Connect), for unplug.
	deadProducers map[*stages.Pipeline]int
	// keptPrevious are the pipelines whose change cannot roll over and
	// that run their previous definition (/readyz says why).
	keptPrevious []stages.RolloverVerdict
	// keptRemoved are the plans of the pipelines among them that the
	// configuration no longer has (their recorded definitions).
	keptRemoved []*stages.Plan
	logs        []*ingest.Log
	// retained serves truncateIngest (on the checkpointer's goroutine).
	retained retainedPositions
}

// vars are the variables configuration strings expand (${device_id}).
func (df *dataflow) vars() map[string]string {
	return map[string]string{"device_id": df.deviceID}
}

// announce sends trigger tr ahead of the queues to the window subtasks of
// every pipeline with unaligned checkpoints (stages.Pipeline.Announce).
func (df *dataflow) announce(tr checkpoint.Trigger) {
	df.mu.Lock()
	defer df.mu.Unlock()
	for _, p := range df.pipelines {
		p.Announce(tr)
	}
}

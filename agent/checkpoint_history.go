package agent

import (
	"github.com/eddy-edge/eddy/agent/admin"
)

// checkpointRecord is one checkpoint of the history the checkpointer
// keeps: the admin API's record, which `eddy checkpoints ls` and the status
// page show.
type checkpointRecord = admin.CheckpointRecord

func (c *checkpointer) record(r checkpointRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.history = append(c.history, r)
	if len(c.history) > 100 {
		c.history = c.history[len(c.history)-100:]
	}
}

// History returns the recent checkpoints, oldest first.
func (c *checkpointer) History() []checkpointRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]checkpointRecord(nil), c.history...)
}

package checkpointing

import (
	"github.com/eddy-edge/eddy/agent/admin"
)

// Record appends r to the history of checkpoints, which keeps the last
// 100. The Driver records each checkpoint it completes or aborts. Safe for
// concurrent use.
func (c *Driver) Record(r admin.CheckpointRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.history = append(c.history, r)
	if len(c.history) > 100 {
		c.history = c.history[len(c.history)-100:]
	}
}

// History returns the recent checkpoints, oldest first: the admin API's
// records, which `eddy checkpoints ls` and the status page show. Safe for
// concurrent use.
func (c *Driver) History() []admin.CheckpointRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]admin.CheckpointRecord(nil), c.history...)
}

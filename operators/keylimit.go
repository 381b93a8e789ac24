package operators

import (
	"fmt"
	"sync/atomic"

	"github.com/eddy-edge/eddy/window"
)

// KeyBudget bounds the live keys of one pipeline, over all its window
// subtasks together (a key lives in exactly one subtask, so their live
// keys add up): a reading that would make key max+1 live is refused.
// Safe for concurrent use by the subtasks.
type KeyBudget struct {
	max int64
	n   atomic.Int64
}

// NewKeyBudget returns a budget of max keys (max > 0), none taken.
func NewKeyBudget(max int) *KeyBudget { return &KeyBudget{max: int64(max)} }

// Max returns the limit.
func (b *KeyBudget) Max() int64 { return b.max }

// Live returns the keys taken: the pipeline's live keys.
func (b *KeyBudget) Live() int64 { return b.n.Load() }

// Add counts n keys live without checking the limit (keys found in state at
// a restore: a smaller max_keys than before refuses new keys only).
func (b *KeyBudget) Add(n int) { b.n.Add(int64(n)) }

// take takes room for one key, if the limit allows.
func (b *KeyBudget) take() bool {
	for {
		n := b.n.Load()
		if n >= b.max {
			return false
		}
		if b.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (b *KeyBudget) release() { b.n.Add(-1) }

// LimitKeys makes the task refuse readings of keys that are not live in
// keys (the Store its operator runs on) when budget is exhausted; they are
// counted in Refused and, with keepRefused, collected as dead letters with
// reason key_limit (TakeRefused). keys' births and deaths outside readings
// the task hands over (purges as the watermark moves) update budget. Call
// it before the task processes anything.
func (t *WindowTask) LimitKeys(keys *window.LiveKeys, budget *KeyBudget, keepRefused bool) {
	t.keys, t.budget, t.keepRefused = keys, budget, keepRefused
	t.refused = new(Delivery)
	t.refusedWhy = fmt.Sprintf("the pipeline holds max_keys = %d keys with window state; a new key is taken once another key's windows are purged", budget.max)
	keys.OnBirth = func() { budget.n.Add(1) }
	keys.OnDeath = budget.release
}

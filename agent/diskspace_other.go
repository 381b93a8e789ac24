//go:build !linux

package agent

import "errors"

// freeBytes is not implemented here: a full disk then ends when a write
// succeeds again (the next savepoint or restart).
func freeBytes(string) (int64, error) { return 0, errors.New("free space unknown on this system") }

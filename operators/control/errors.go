package control

import "errors"

// Sentinels for control messages the agent must dead-letter. Apply and
// Restore wrap them with the detail; match them with errors.Is.
var (
	// ErrMalformed is returned when a message is not one JSON object
	// (syntax errors, trailing data, a top-level array or scalar), nests
	// deeper than MaxDepth, or holds a number outside float64's range.
	ErrMalformed = errors.New("control: malformed message")
	// ErrLimit is returned when applying a message would take the state
	// over Limits.MaxKeys or Limits.MaxBytes. The state is left unchanged.
	ErrLimit = errors.New("control: state limit exceeded")
)

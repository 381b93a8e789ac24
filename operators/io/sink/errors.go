package sink

import "errors"

var (
	// ErrClosed is returned (wrapped) by every method of a sink after Close.
	ErrClosed = errors.New("sink: closed")
	// ErrNotConnected is returned (wrapped) by the MQTT sink's Write when the
	// broker stayed unreachable for the whole publish timeout; nothing of the
	// batch was published.
	ErrNotConnected = errors.New("sink: mqtt not connected")
	// ErrPublishTimeout is returned (wrapped) by the MQTT sink's Write when
	// some publish of the batch was not acknowledged within the timeout. The
	// message may still arrive later (paho keeps it and re-sends it after a
	// reconnect): delivery is at least once.
	ErrPublishTimeout = errors.New("sink: mqtt publish timed out")
)

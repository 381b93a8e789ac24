package source

// Stats are a network source's counters since it was built.
type Stats struct {
	// Received counts messages queued for delivery.
	Received uint64
	// Dropped counts messages lost on Eddy's side: QoS 0 messages over
	// MQTTOptions.MaxPending (MQTT), publishes rejected to the sensor
	// (embedded broker; the sensor re-sends QoS 1/2 ones).
	Dropped uint64
	// Reconnects counts connections made after the first (MQTT).
	Reconnects uint64
	// Connected reports whether the source is connected now (MQTT; the
	// embedded source is connected while Run runs).
	Connected bool
	// Pending is the number of messages received and not yet delivered.
	Pending int
}

// StatsReporter is implemented by the network sources (*MQTT, *SharedMQTT).
type StatsReporter interface {
	Stats() Stats
}

//go:build race

package upload

// raceEnabled: the race detector makes sync.Pool drop items, so allocation
// counts are meaningless.
const raceEnabled = true

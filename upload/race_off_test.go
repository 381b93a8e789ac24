//go:build !race

package upload

const raceEnabled = false

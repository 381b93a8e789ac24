package sink

import "github.com/eddy-edge/eddy/operators/record"

// testStart is a window start the tests' expected outputs are written for:
// 2026-11-29T10:00:00Z.
const testStart = int64(1795946400000)

// benchResult is a typical window firing: four aggregates of one sensor.
func benchResult() *record.Result {
	return &record.Result{
		Pipeline: "temp_1m", Key: []byte("sensor-0042"),
		Start: testStart, End: testStart + 60000,
		Kind: record.KindFinal, Firing: 0,
		Names:  []string{"avg_temp", "max_temp", "min_temp", "n"},
		Values: []float64{21.4333333, 22.1, 19.85, 120},
	}
}

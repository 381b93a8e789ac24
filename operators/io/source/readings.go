package source

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// readingKind is what the simulator made of one reading.
type readingKind uint8

const (
	readingInvalid    readingKind = iota
	readingOnTime                 // stamped now, with a little jitter
	readingOutOfOrder             // stamped up to 1.5 s in the past
	readingLate                   // stamped 30 to 90 s in the past
	readingMalformed              // broken JSON, no ts, or temp as a string
)

// deviceWalk is one simulated device's state.
type deviceWalk struct {
	name           string
	topic          string
	meanTemp, temp float64
	meanHum, hum   float64
}

// readingGenerator makes the simulator's readings. It is deterministic: the
// same seed and options give the same devices, kinds and values; only the
// timestamps follow the now passed in. Not safe for concurrent use.
type readingGenerator struct {
	rng        *rand.Rand
	devices    []deviceWalk
	next       int // device of the next reading: round robin
	outOfOrder float64
	late       float64
	malformed  float64
	buf        []byte
}

func newReadingGenerator(opts SimulatorOptions) *readingGenerator {
	g := &readingGenerator{
		rng:        rand.New(rand.NewPCG(uint64(opts.Seed), 0x9e3779b97f4a7c15)),
		outOfOrder: opts.OutOfOrder,
		late:       opts.Late,
		malformed:  opts.Malformed,
	}
	for i := range opts.Devices {
		name := "sensor-" + strconv.Itoa(i+1)
		d := deviceWalk{
			name:     name,
			topic:    strings.ReplaceAll(opts.Topic, "${sensor}", name),
			meanTemp: 17 + 10*g.rng.Float64(), // each device its own climate
			meanHum:  30 + 30*g.rng.Float64(),
		}
		d.temp, d.hum = d.meanTemp, d.meanHum
		g.devices = append(g.devices, d)
	}
	return g
}

// reading returns the next reading's topic and JSON payload for the wall
// clock nowMs. The payload is a new slice (paho keeps it until acked).
func (g *readingGenerator) reading(nowMs int64) (topic string, payload []byte, kind readingKind) {
	d := &g.devices[g.next]
	g.next = (g.next + 1) % len(g.devices)
	// A random walk pulled back towards the device's mean.
	d.temp += 0.15*g.rng.NormFloat64() + 0.05*(d.meanTemp-d.temp)
	d.hum += 0.3*g.rng.NormFloat64() + 0.05*(d.meanHum-d.hum)
	d.hum = min(max(d.hum, 0), 100)

	// Draw every random number whatever the kind, so values stay the same
	// when fractions change only the kind.
	u := g.rng.Float64()
	jitter := g.rng.Int64N(100)
	ooo := g.rng.Int64N(1500)
	late := 30000 + g.rng.Int64N(60000)
	variant := g.rng.IntN(3)

	ts := nowMs - jitter
	switch {
	case u < g.malformed:
		kind = readingMalformed
	case u < g.malformed+g.late:
		kind, ts = readingLate, nowMs-late
	case u < g.malformed+g.late+g.outOfOrder:
		kind, ts = readingOutOfOrder, nowMs-ooo
	default:
		kind = readingOnTime
	}
	temp := math.Round(d.temp*100) / 100
	hum := math.Round(d.hum*10) / 10

	b := append(g.buf[:0], `{"device":"`...)
	b = append(b, d.name...)
	b = append(b, '"')
	if kind != readingMalformed || variant != 1 { // variant 1: no ts
		b = append(b, `,"ts":`...)
		b = strconv.AppendInt(b, ts, 10)
	}
	b = append(b, `,"temp":`...)
	if kind == readingMalformed && variant == 2 { // variant 2: temp as a string
		b = append(b, '"')
		b = strconv.AppendFloat(b, temp, 'f', -1, 64)
		b = append(b, '"')
	} else {
		b = strconv.AppendFloat(b, temp, 'f', -1, 64)
	}
	b = append(b, `,"humidity":`...)
	b = strconv.AppendFloat(b, hum, 'f', -1, 64)
	if kind != readingMalformed || variant != 0 { // variant 0: broken JSON, no closing brace
		b = append(b, '}')
	}
	g.buf = b
	return d.topic, append([]byte(nil), b...), kind
}

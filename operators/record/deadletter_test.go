package record

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

type decodedDeadLetter struct {
	Pipeline string `json:"pipeline"`
	Reason   string `json:"reason"`
	Detail   string `json:"detail"`
	Topic    string `json:"topic"`
	Offset   uint64 `json:"offset"`
	Payload  string `json:"payload"`
}

func TestAppendDeadLetter(t *testing.T) {
	got := string(AppendDeadLetter(nil, "temp_1m", ReasonLate, "t=1000 ≤ watermark 5000", "sensors/s1/telemetry", 18446744073709551615, []byte(`{"ts":1000,"temp":"x"}`)))
	want := `{"pipeline":"temp_1m","reason":"late","detail":"t=1000 ≤ watermark 5000","topic":"sensors/s1/telemetry",` +
		`"offset":18446744073709551615,"payload":"{\"ts\":1000,\"temp\":\"x\"}"}`
	if got != want {
		t.Fatalf("AppendDeadLetter =\n%s\nwant\n%s", got, want)
	}
}

// Binary garbage payloads stay valid JSON; valid UTF-8 text round-trips.
func TestAppendDeadLetter_BinaryPayloads(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	payloads := [][]byte{nil, {0}, {0xff, 0xfe, 0xfd}, []byte("\x1b[31mred\x1b[0m"), []byte("ok \"quoted\" \\ text\n")}
	for range 2000 {
		p := make([]byte, rng.IntN(64))
		for i := range p {
			p[i] = byte(rng.IntN(256))
		}
		payloads = append(payloads, p)
	}
	var buf []byte
	for _, p := range payloads {
		buf = AppendDeadLetter(buf[:0], "p", "decode", "invalid character", "t/\x00/#", 7, p)
		var got decodedDeadLetter
		if err := json.Unmarshal(buf, &got); err != nil {
			t.Fatalf("payload %q (seed %d): %v in %s", p, seed, err, buf)
		}
		if want := jsonString(t, string(p)); got.Payload != want {
			t.Fatalf("payload %q (seed %d): decoded %q, want %q", p, seed, got.Payload, want)
		}
		// The same as encoding/json makes of the payload (this also checks
		// jsonString's rule, which the round-trip tests rely on).
		var viaEncodingJSON string
		marshaled, _ := json.Marshal(string(p))
		if err := json.Unmarshal(marshaled, &viaEncodingJSON); err != nil || viaEncodingJSON != got.Payload {
			t.Fatalf("payload %q (seed %d): decoded %q, encoding/json gives %q", p, seed, got.Payload, viaEncodingJSON)
		}
		if got.Offset != 7 || got.Topic != "t/\x00/#" || got.Reason != "decode" {
			t.Fatalf("payload %q: decoded %+v", p, got)
		}
	}
}

func TestAppendDeadLetter_ZeroAllocs(t *testing.T) {
	payload := []byte(`{"device":"s1","ts":1795946400000,"temp":21.5}`)
	buf := make([]byte, 0, 512)
	allocs := testing.AllocsPerRun(1000, func() {
		buf = AppendDeadLetter(buf[:0], "temp_1m", ReasonLate, "too late", "sensors/s1", 42, payload)
	})
	if allocs != 0 {
		t.Fatalf("AppendDeadLetter: %v allocs per run, want 0", allocs)
	}
}

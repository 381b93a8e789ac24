package record

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
	"unicode/utf8"
)

// 2026-11-29T10:00:00Z
const testStart = int64(1795946400000)

func TestAppendJSON(t *testing.T) {
	tests := []struct {
		name     string
		deviceID string
		r        Result
		want     string
	}{
		{
			name:     "final with aggregates",
			deviceID: "gw-7",
			r: Result{
				Pipeline: "temp_1m", Key: []byte("sensor-3"),
				Start: testStart, End: testStart + 60000,
				Kind: KindFinal, Firing: 0,
				Names:  []string{"avg_temp", "max_temp", "n"},
				Values: []float64{21.43, 22.1, 12},
			},
			want: `{"id":"gw-7/temp_1m/sensor-3/1795946400000-1795946460000/0","pipeline":"temp_1m","key":"sensor-3",` +
				`"window_start":"2026-11-29T10:00:00.000Z","window_end":"2026-11-29T10:01:00.000Z",` +
				`"window_start_ms":1795946400000,"window_end_ms":1795946460000,"kind":"final","firing":0,` +
				`"avg_temp":21.43,"max_temp":22.1,"n":12}`,
		},
		{
			name:     "NaN and Inf are null",
			deviceID: "d",
			r: Result{
				Pipeline: "p", Key: []byte("k"), Start: testStart + 5, End: testStart + 1005,
				Kind: KindLateUpdate, Firing: 3,
				Names:  []string{"avg", "max", "min"},
				Values: []float64{math.NaN(), math.Inf(1), math.Inf(-1)},
			},
			want: `{"id":"d/p/k/1795946400005-1795946401005/3","pipeline":"p","key":"k",` +
				`"window_start":"2026-11-29T10:00:00.005Z","window_end":"2026-11-29T10:00:01.005Z",` +
				`"window_start_ms":1795946400005,"window_end_ms":1795946401005,"kind":"late_update","firing":3,` +
				`"avg":null,"max":null,"min":null}`,
		},
		{
			name:     "key needing escapes",
			deviceID: "gw\"1",
			r: Result{
				Pipeline: "p", Key: []byte("a\"b\\c\n\x01\xffé/x"), Start: 0, End: 1000,
				Kind: KindEarly, Firing: 1,
				Names: []string{"n"}, Values: []float64{1},
			},
			want: `{"id":"gw\"1/p/a\"b\\c\n\u0001\ufffdé/x/0-1000/1","pipeline":"p","key":"a\"b\\c\n\u0001\ufffdé/x",` +
				`"window_start":"1970-01-01T00:00:00.000Z","window_end":"1970-01-01T00:00:01.000Z",` +
				`"window_start_ms":0,"window_end_ms":1000,"kind":"early","firing":1,"n":1}`,
		},
		{
			name:     "negative timestamps",
			deviceID: "d",
			r: Result{
				Pipeline: "p", Key: []byte("k"), Start: -60000, End: -1,
				Kind: KindFinal, Names: []string{}, Values: []float64{},
			},
			want: `{"id":"d/p/k/-60000--1/0","pipeline":"p","key":"k",` +
				`"window_start":"1969-12-31T23:59:00.000Z","window_end":"1969-12-31T23:59:59.999Z",` +
				`"window_start_ms":-60000,"window_end_ms":-1,"kind":"final","firing":0}`,
		},
		{
			name:     "large numbers",
			deviceID: "d",
			r: Result{
				Pipeline: "p", Key: nil, Start: 253402300799000, End: 253402300800000,
				Kind: KindFinal, Firing: math.MaxInt32,
				Names:  []string{"sum", "tiny", "count"},
				Values: []float64{1.7976931348623157e308, 5e-324, 9007199254740992},
			},
			want: `{"id":"d/p//253402300799000-253402300800000/2147483647","pipeline":"p","key":"",` +
				`"window_start":"9999-12-31T23:59:59.000Z","window_end":"10000-01-01T00:00:00.000Z",` +
				`"window_start_ms":253402300799000,"window_end_ms":253402300800000,"kind":"final","firing":2147483647,` +
				`"sum":1.7976931348623157e+308,"tiny":5e-324,"count":9007199254740992}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(AppendJSON([]byte("prefix:"), tt.deviceID, &tt.r))
			if got != "prefix:"+tt.want {
				t.Errorf("AppendJSON =\n%s\nwant\n%s", got, "prefix:"+tt.want)
			}
			if tt.r.End < 253402300800000 && !json.Valid([]byte(tt.want)) {
				t.Errorf("want is not valid JSON: %s", tt.want)
			}
		})
	}
}

func TestAppendJSON_MismatchedValuesPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("AppendJSON with 2 names and 1 value did not panic")
		}
	}()
	AppendJSON(nil, "d", &Result{Names: []string{"a", "b"}, Values: []float64{1}})
}

func TestAppendJSON_ZeroAllocs(t *testing.T) {
	r := benchResult()
	buf := make([]byte, 0, 1024)
	allocs := testing.AllocsPerRun(1000, func() {
		buf = AppendJSON(buf[:0], "gw-0042", r)
	})
	if allocs != 0 {
		t.Fatalf("AppendJSON into a reused buffer: %v allocs per run, want 0", allocs)
	}
}

// decodedResult mirrors the output record for encoding/json.
type decodedResult struct {
	ID            string `json:"id"`
	Pipeline      string `json:"pipeline"`
	Key           string `json:"key"`
	WindowStart   string `json:"window_start"`
	WindowEnd     string `json:"window_end"`
	WindowStartMs int64  `json:"window_start_ms"`
	WindowEndMs   int64  `json:"window_end_ms"`
	Kind          string `json:"kind"`
	Firing        int    `json:"firing"`
}

// jsonString is what encoding/json makes of s: each byte that is not part
// of valid UTF-8 becomes U+FFFD, as converting to []rune does.
func jsonString(t *testing.T, s string) string {
	t.Helper()
	return string([]rune(s))
}

func randomText(rng *rand.Rand) string {
	const alphabet = "ab/-_\"\\\n\t\x00\x1f\x7f\xff\xc3é温🌡\u2028"
	n := rng.IntN(12)
	var b []byte
	for range n {
		if rng.IntN(4) == 0 {
			b = append(b, byte(rng.IntN(256)))
			continue
		}
		b = append(b, alphabet[rng.IntN(len(alphabet))])
	}
	return string(b)
}

func randomFloat(rng *rand.Rand) float64 {
	switch rng.IntN(6) {
	case 0:
		return math.NaN()
	case 1:
		return float64(rng.Int64N(1<<53)) - 1<<52
	case 2:
		return math.Float64frombits(rng.Uint64())
	default:
		return rng.NormFloat64() * math.Pow(10, float64(rng.IntN(40)-20))
	}
}

// Property: AppendJSON output parses with encoding/json and round-trips every
// field (strings as encoding/json would coerce them, values bit-exact).
func TestAppendJSON_RoundTrip(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	var buf []byte
	for i := range 3000 {
		r := Result{
			Pipeline: randomText(rng),
			Key:      []byte(randomText(rng)),
			Start:    rng.Int64N(1<<46) - 1<<45,
			Kind:     []string{KindFinal, KindEarly, KindLateUpdate}[rng.IntN(3)],
			Firing:   rng.IntN(1000),
		}
		r.End = r.Start + rng.Int64N(1<<32)
		for j := range rng.IntN(5) {
			r.Names = append(r.Names, "agg"+strconv.Itoa(j)+randomText(rng))
			r.Values = append(r.Values, randomFloat(rng))
		}
		deviceID := randomText(rng)
		buf = AppendJSON(buf[:0], deviceID, &r)

		var got decodedResult
		if err := json.Unmarshal(buf, &got); err != nil {
			t.Fatalf("case %d (seed %d): %v in %s", i, seed, err, buf)
		}
		want := decodedResult{
			ID: jsonString(t, deviceID) + "/" + jsonString(t, r.Pipeline) + "/" + jsonString(t, string(r.Key)) + "/" +
				strconv.FormatInt(r.Start, 10) + "-" + strconv.FormatInt(r.End, 10) + "/" + strconv.Itoa(r.Firing),
			Pipeline:      jsonString(t, r.Pipeline),
			Key:           jsonString(t, string(r.Key)),
			WindowStart:   time.UnixMilli(r.Start).UTC().Format("2006-01-02T15:04:05.000Z07:00"),
			WindowEnd:     time.UnixMilli(r.End).UTC().Format("2006-01-02T15:04:05.000Z07:00"),
			WindowStartMs: r.Start, WindowEndMs: r.End, Kind: r.Kind, Firing: r.Firing,
		}
		if got != want {
			t.Fatalf("case %d (seed %d): decoded\n%+v\nwant\n%+v", i, seed, got, want)
		}
		for _, ts := range []string{got.WindowStart, got.WindowEnd} {
			if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
				t.Fatalf("case %d (seed %d): %q is not RFC 3339: %v", i, seed, ts, err)
			}
		}

		var fields map[string]any
		dec := json.NewDecoder(bytes.NewReader(buf))
		dec.UseNumber()
		if err := dec.Decode(&fields); err != nil {
			t.Fatal(err)
		}
		for j, name := range r.Names {
			v, ok := fields[jsonString(t, name)]
			if !ok {
				t.Fatalf("case %d (seed %d): aggregate %q missing in %s", i, seed, name, buf)
			}
			want := r.Values[j]
			if math.IsNaN(want) || math.IsInf(want, 0) {
				if v != nil {
					t.Fatalf("case %d (seed %d): %q = %v, want null", i, seed, name, v)
				}
				continue
			}
			f, err := v.(json.Number).Float64()
			if err != nil || math.Float64bits(f) != math.Float64bits(want) {
				t.Fatalf("case %d (seed %d): %q = %v, want %v", i, seed, name, v, want)
			}
		}
		if !utf8.Valid(buf) {
			t.Fatalf("case %d (seed %d): output is not valid UTF-8: %q", i, seed, buf)
		}
	}
}

func benchResult() *Result {
	return &Result{
		Pipeline: "temp_1m", Key: []byte("sensor-0042"),
		Start: testStart, End: testStart + 60000,
		Kind: KindFinal, Firing: 0,
		Names:  []string{"avg_temp", "max_temp", "min_temp", "n"},
		Values: []float64{21.4333333, 22.1, 19.85, 120},
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	r := benchResult()
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendJSON(buf[:0], "gw-0042", r)
	}
	b.SetBytes(int64(len(buf)))
}

func TestAppendTimestamp(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	cases := []int64{0, -1, 1, 999, -1000, testStart, 253402300799999, 253402300800000, -62135596800000, -62135596800001, math.MaxInt64 / 1000, math.MinInt64 / 1000}
	for range 10000 {
		cases = append(cases, rng.Int64N(1<<48)-1<<47)
	}
	for _, ms := range cases {
		want := time.UnixMilli(ms).UTC().AppendFormat(nil, timeLayout)
		if got := appendTimestamp(nil, ms); !bytes.Equal(got, want) {
			t.Fatalf("appendTimestamp(%d) = %s, want %s (seed %d)", ms, got, want, seed)
		}
	}
}

package sink

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/operators/record"
)

func TestStdout_Plain(t *testing.T) {
	var out bytes.Buffer
	s := NewStdout(&out, false)
	r := benchResult()
	items := []record.Item{
		{Payload: record.AppendJSON(nil, "gw", r), Result: r},
		{Payload: []byte(`{"pipeline":"p","reason":"late"}`)},
	}
	if err := s.Write(items); err != nil {
		t.Fatal(err)
	}
	want := string(items[0].Payload) + "\n" + string(items[1].Payload) + "\n"
	if out.String() != want {
		t.Fatalf("plain output =\n%s\nwant\n%s", out.String(), want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(items); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close = %v, want ErrClosed", err)
	}
}

func TestStdout_Pretty(t *testing.T) {
	var out bytes.Buffer
	s := NewStdout(&out, true)
	s.(*stdout).now = func() time.Time { return time.UnixMilli(testStart + 5000) }
	start := testStart
	items := []record.Item{
		{Result: &record.Result{Pipeline: "temp_1m", Key: []byte("sensor-3"), Start: start, End: start + 5000, Kind: record.KindFinal,
			Names: []string{"n", "avg_temp", "max_temp"}, Values: []float64{12, 21.4333, 22.1}}},
		{Result: &record.Result{Pipeline: "temp_1m", Key: []byte("s-10"), Start: start, End: start + 5000, Kind: record.KindEarly, Firing: 2,
			Names: []string{"n", "avg_temp", "max_temp"}, Values: []float64{3, math.NaN(), 0.000123}}},
		{Result: &record.Result{Pipeline: "hum", Key: []byte("bad key\n"), Start: start + 250, End: start + 1250, Kind: record.KindLateUpdate, Firing: 1,
			Names: []string{"sum"}, Values: []float64{-1e20}}},
		{Payload: []byte(`{"reason":"late"}`)},
	}
	if err := s.Write(items); err != nil {
		t.Fatal(err)
	}
	want := "10:00:05  temp_1m  sensor-3  [10:00:00,10:00:05) final#0  n=12 avg_temp=21.43 max_temp=22.10\n" +
		"10:00:05  temp_1m  s-10      [10:00:00,10:00:05) early#2  n=3 avg_temp=null max_temp=0.000123\n" +
		"10:00:05  hum      \"bad key\\n\"  [10:00:00.250,10:00:01.250) late_update#1  sum=-1e+20\n" +
		"{\"reason\":\"late\"}\n"
	if out.String() != want {
		t.Fatalf("pretty output =\n%s\nwant\n%s", out.String(), want)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestStdout_WriteError(t *testing.T) {
	s := NewStdout(failingWriter{}, false)
	err := s.Write([]record.Item{{Payload: []byte("{}")}})
	if err == nil || err.Error() != "sink: stdout write: broken pipe" {
		t.Fatalf("Write = %v, want the writer's error wrapped", err)
	}
}

package upload

import (
	"context"
	"testing"
	"time"
)

// fakeClock is a clock whose sleeps advance it.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }
func (c *fakeClock) Sleep(_ context.Context, d time.Duration) error {
	c.now = c.now.Add(d)
	return nil
}

func TestLimiter_Rate(t *testing.T) {
	cases := []struct {
		name   string
		rate   int64
		writes int
		size   int
		want   time.Duration // total time the writes take
	}{
		// 1 MiB at 1 MiB/s takes 1s, less the 100 ms burst credit.
		{"1MiB at 1MiB/s", 1 << 20, 32, 32 << 10, 900 * time.Millisecond},
		{"1MiB at 256KiB/s", 256 << 10, 32, 32 << 10, 3900 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{now: time.Unix(1000, 0)}
			l := newLimiter(tc.rate)
			l.now, l.sleep = clk.Now, clk.Sleep
			start := clk.now
			for range tc.writes {
				if err := l.wait(context.Background(), tc.size); err != nil {
					t.Fatal(err)
				}
			}
			if got := clk.now.Sub(start); got < tc.want-time.Millisecond || got > tc.want+time.Millisecond {
				t.Fatalf("took %v, want %v", got, tc.want)
			}
		})
	}
	if newLimiter(0) != nil {
		t.Fatal("0 is unlimited")
	}
	var nilLimiter *limiter
	if err := nilLimiter.wait(context.Background(), 1<<30); err != nil {
		t.Fatal(err)
	}
}

func TestBackoff_Delay(t *testing.T) {
	b := backoff{min: time.Second, max: time.Minute}
	cases := []struct {
		attempt int
		jitter  float64
		want    time.Duration
	}{
		{0, 0, 500 * time.Millisecond},
		{0, 0.999999, time.Second - time.Microsecond},
		{1, 0, time.Second},
		{3, 0.5, 6 * time.Second},
		{10, 0, 30 * time.Second},
		{1000, 1, time.Minute},
	}
	for _, tc := range cases {
		if got := b.delay(tc.attempt, tc.jitter); got.Round(time.Millisecond) != tc.want.Round(time.Millisecond) {
			t.Errorf("delay(%d, %v) = %v, want %v", tc.attempt, tc.jitter, got, tc.want)
		}
	}
}

func TestOptions_Normalize(t *testing.T) {
	cases := []struct {
		name    string
		opts    Options
		wantErr bool
		check   func(Options) bool
	}{
		{"minimal", Options{Endpoint: "h:9000", Bucket: "b"}, false,
			func(o Options) bool { return o.Concurrency == 2 && o.Prefix == "" && !o.Secure }},
		{"https scheme", Options{Endpoint: "https://h:9000/", Bucket: "b", Prefix: "dev"}, false,
			func(o Options) bool { return o.Secure && o.Endpoint == "h:9000" && o.Prefix == "dev/" }},
		{"no endpoint", Options{Bucket: "b"}, true, nil},
		{"no bucket", Options{Endpoint: "h"}, true, nil},
		{"path in endpoint", Options{Endpoint: "h/x", Bucket: "b"}, true, nil},
		{"short key", Options{Endpoint: "h", Bucket: "b", EncryptionKey: []byte("short")}, true, nil},
		{"ca without tls", Options{Endpoint: "h", Bucket: "b", CAFile: "ca.pem"}, true, nil},
		{"half credentials", Options{Endpoint: "h", Bucket: "b", AccessKey: "a"}, true, nil},
		{"absolute prefix", Options{Endpoint: "h", Bucket: "b", Prefix: "/x/"}, true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, err := tc.opts.normalize()
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if tc.check != nil && !tc.check(o) {
				t.Fatalf("normalized %+v", o)
			}
		})
	}
}

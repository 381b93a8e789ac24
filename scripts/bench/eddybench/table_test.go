package main

import (
	"strings"
	"testing"
)

func TestTable_WritePadsByRunes(t *testing.T) {
	tb := newTable("a", "start → x")
	tb.add("long cell", 1)
	var b strings.Builder
	tb.write(&b)
	want := "" +
		"| a         | start → x |\n" +
		"| --------- | --------- |\n" +
		"| long cell | 1         |\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestSI(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{12, "12"},
		{1234, "1.2k"},
		{1_090_000, "1.09M"},
	}
	for _, tt := range tests {
		if got := si(tt.v); got != tt.want {
			t.Errorf("si(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

func TestPercentile_NearestRank(t *testing.T) {
	sorted := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	tests := []struct {
		q    float64
		want float64
	}{
		{0.5, 5}, {0.99, 10}, {1, 10}, {0, 1}, {0.1, 1},
	}
	for _, tt := range tests {
		if got := percentile(sorted, tt.q); got != tt.want {
			t.Errorf("percentile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile of nothing = %v", got)
	}
}

func TestSplitList(t *testing.T) {
	if got := strings.Join(splitList("a,,b,"), "|"); got != "a|b" {
		t.Fatalf("splitList = %q", got)
	}
}

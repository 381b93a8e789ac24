package main

import (
	"os"
	"testing"
	"time"
)

func TestParseStatCPU_NameWithSpacesAndParens(t *testing.T) {
	// Fields after the name: state ppid pgrp session tty tpgid flags minflt
	// cminflt majflt cmajflt utime stime ...
	stat := []byte("42 (my (odd) cmd) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0")
	got, err := parseStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * time.Second; got != want {
		t.Fatalf("cpu = %v, want %v (300 ticks)", got, want)
	}
	if _, err := parseStatCPU([]byte("42 (x) S 1")); err == nil {
		t.Fatal("short stat parsed")
	}
}

func TestField(t *testing.T) {
	data := []byte("Name:\teddy\nVmHWM:\t   35644 kB\nVmRSS:\t   30000 kB\n")
	if v, err := field(data, "VmHWM:"); err != nil || v != 35644 {
		t.Fatalf("VmHWM = %v, %v", v, err)
	}
	if _, err := field(data, "VmSwap:"); err == nil {
		t.Fatal("missing field found")
	}
}

func TestSampleProc_Self(t *testing.T) {
	s, err := sampleProc(os.Getpid())
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	if s.peakRSS <= 0 || s.rss <= 0 || s.peakRSS < s.rss {
		t.Fatalf("sample %+v", s)
	}
}

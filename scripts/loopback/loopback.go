// Package loopback finds free TCP ports on 127.0.0.1 for the real parts the
// tests and benchmarks start (brokers, the S3 server, agents' endpoints).
//
// A port is free when asked; another process may take it before the caller
// binds it. The callers start one server at a time on a private machine, so
// they do not retry.
package loopback

import (
	"net"
	"strconv"
	"testing"
)

// Port returns a TCP port on 127.0.0.1 that was free a moment ago.
func Port() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// MustPort is Port for tests: it fails tb if no port can be had.
func MustPort(tb testing.TB) int {
	tb.Helper()
	p, err := Port()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// Addr returns "127.0.0.1:port" for a port from MustPort.
func Addr(tb testing.TB) string {
	tb.Helper()
	return "127.0.0.1:" + strconv.Itoa(MustPort(tb))
}

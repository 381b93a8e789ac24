package broker

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBroker_CloseBounded: a mochi Close that never returns (its listener
// close can deadlock) does not hang Broker.Close, which warns and returns
// an error after the timeout; meanwhile new connections are closed.
func TestBroker_CloseBounded(t *testing.T) {
	var logs lockedBuffer
	b, err := Start(Options{Listen: "127.0.0.1:0"}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	realClose := b.closeServer
	t.Cleanup(func() { close(release); _ = realClose() })
	b.closeServer = func() error { <-release; return nil }
	b.closeTimeout = 50 * time.Millisecond

	done := make(chan error, 1)
	go func() { done <- b.Close() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not done") {
			t.Fatalf("Close = %v, want a timeout error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close hangs on a mochi Close that never returns")
	}
	if !strings.Contains(logs.String(), "did not finish") {
		t.Errorf("no warning logged: %s", logs.String())
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}

	// A connection arriving now is closed without an answer.
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil || n != 0 {
		t.Fatalf("a new connection after Close was served (read %d, %v)", n, err)
	}
}

// lockedBuffer is a bytes.Buffer safe for the broker's goroutines to log
// into while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

package await

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		name    string
		holdsAt int // call number from which cond holds; 0: never
		want    string
	}{
		{"at once", 1, ""},
		{"after polls", 4, ""},
		{"never", 0, "not within 50ms: 5 of 6 windows"},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			err := Within(50*time.Millisecond, func() error {
				calls++
				if c.holdsAt != 0 && calls >= c.holdsAt {
					return nil
				}
				return errors.New("5 of 6 windows")
			})
			if got := errString(err); got != c.want {
				t.Fatalf("Within = %q, want %q", got, c.want)
			}
			if c.holdsAt != 0 && calls != c.holdsAt {
				t.Errorf("cond called %d times, want %d (no call after it held)", calls, c.holdsAt)
			}
		})
	}
}

func TestHolds(t *testing.T) {
	n := 0
	if !Holds(time.Second, func() bool { n++; return n == 3 }) {
		t.Fatal("Holds = false for a condition that held at the third call")
	}
	if Holds(20*time.Millisecond, func() bool { return false }) {
		t.Fatal("Holds = true for a condition that never held")
	}
}

func TestTrue_FailsWithWhat(t *testing.T) {
	r := &recorder{}
	done := make(chan struct{})
	go func() { // Fatal ends the goroutine it runs on
		defer close(done)
		True(r, 20*time.Millisecond, "the source to connect", func() bool { return false })
	}()
	<-done
	if !strings.Contains(r.msg, "the source to connect: still false") || !strings.Contains(r.msg, "not within 20ms") {
		t.Fatalf("failure = %q", r.msg)
	}
}

func TestNever(t *testing.T) {
	calls := 0
	start := time.Now()
	Never(t, 30*time.Millisecond, func() error { calls++; return nil })
	if time.Since(start) < 30*time.Millisecond || calls < 2 {
		t.Fatalf("Never returned after %v and %d calls: it must watch the whole period", time.Since(start), calls)
	}

	r := &recorder{}
	done := make(chan struct{})
	start = time.Now()
	go func() {
		defer close(done)
		n := 0
		Never(r, time.Minute, func() error {
			if n++; n == 2 {
				return errors.New("a duplicate arrived")
			}
			return nil
		})
	}()
	<-done
	if r.msg != "a duplicate arrived" {
		t.Fatalf("failure = %q", r.msg)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("Never failed after %v: it must fail at the event", time.Since(start))
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// recorder is a testing.TB whose Fatal records its message and ends the
// goroutine, as testing.T's does.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatal(args ...any) {
	for _, a := range args {
		r.msg += errString(a.(error))
	}
	runtime.Goexit()
}

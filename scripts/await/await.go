// Package await is how a test waits: a condition polled until it holds or
// a deadline passes, and a failure that says what the condition last saw.
// A test never sleeps to let something happen; it awaits it, so it runs as
// fast as the machine allows and fails with a reason when it cannot.
//
// Conditions are polled at once, then after Poll, the pause doubling up to
// MaxPoll; each call of a condition runs on the caller's goroutine, never
// concurrently with another.
package await

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Poll is the first pause between two calls of a condition: a condition
// that holds soon is seen soon.
const Poll = 10 * time.Millisecond

// MaxPoll bounds the pause as it doubles: a test ends at most MaxPoll after
// its condition holds, and a long wait on a large output file or an HTTP
// endpoint does not take the CPU from the processes under test (the suites
// run tests in parallel on two cores).
const MaxPoll = 100 * time.Millisecond

// pauses returns the next pause each time it is called.
func pauses() func() time.Duration {
	next := Poll
	return func() time.Duration {
		d := next
		next = min(2*next, MaxPoll)
		return d
	}
}

// Within calls cond until it returns nil, and returns nil then; when d
// passes first it returns cond's last error, wrapped with how long it
// waited. It is for a test that goes on either way.
func Within(d time.Duration, cond func() error) error {
	deadline := time.Now().Add(d)
	pause := pauses()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("not within %v: %w", d, err)
		}
		time.Sleep(min(pause(), time.Until(deadline)))
	}
}

// Until is Within that fails t (Fatal, so from the test's goroutine only)
// with cond's last error when d passes.
func Until(t testing.TB, d time.Duration, cond func() error) {
	t.Helper()
	if err := Within(d, cond); err != nil {
		t.Fatal(err)
	}
}

// True is Until for a condition that can only say yes or no; what names
// it in the failure ("the source to connect").
func True(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	Until(t, d, yesOrNo(what, cond))
}

// Holds reports whether cond held within d.
func Holds(d time.Duration, cond func() bool) bool {
	return Within(d, yesOrNo("condition", cond)) == nil
}

// Never checks that something does not happen for d: it calls cond over
// the whole of d and fails t with cond's error as soon as cond returns
// one ("a duplicate arrived"). It stands where a test would otherwise
// sleep to give a wrong event the chance to show, and it fails at the
// event, not after the sleep.
func Never(t testing.TB, d time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	pause := pauses()
	for {
		if err := cond(); err != nil {
			t.Fatal(err)
		}
		if !time.Now().Before(deadline) {
			return
		}
		time.Sleep(min(pause(), time.Until(deadline)))
	}
}

// errNo is what a yes-or-no condition last saw.
var errNo = errors.New("still false")

func yesOrNo(what string, cond func() bool) func() error {
	return func() error {
		if cond() {
			return nil
		}
		return fmt.Errorf("%s: %w", what, errNo)
	}
}

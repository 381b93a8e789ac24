package sink

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/eddy-edge/eddy/operators/record"
)

// NewStdout returns a sink that writes to w, typically os.Stdout.
//
// Plain mode writes each item's payload followed by a newline (JSON Lines).
// Pretty mode, for the quickstart, writes one aligned human line per firing:
//
//	10:00:05  temp_1m  sensor-3  [10:00:00,10:00:05) final#0  n=12 avg_temp=21.43 max_temp=22.10
//
// that is the wall-clock time of the write, the pipeline, the key, the window
// [start,end), kind#firing and the aggregates in config order. All times are
// UTC; window bounds get milliseconds when they are not whole seconds.
// Integral values print without decimals, others with two (or four
// significant digits when tiny or huge), NaN as null. Columns widen to the
// longest pipeline and key seen so far. Items without a Result print as
// their JSON payload.
//
// Each Write issues one w.Write for the whole batch, so Flush has nothing to
// do; Close does not close w.
func NewStdout(w io.Writer, pretty bool) Sink {
	return &stdout{w: w, pretty: pretty, now: time.Now}
}

type stdout struct {
	mu     sync.Mutex
	w      io.Writer
	pretty bool
	now    func() time.Time // replaced by tests

	buf                 []byte // reused line buffer
	pipeWidth, keyWidth int    // widest pipeline and key printed so far, in runes
	closed              bool
}

func (s *stdout) Write(items []record.Item) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("sink: stdout write: %w", ErrClosed)
	}
	if len(items) == 0 {
		return nil
	}
	s.buf = s.buf[:0]
	var now time.Time
	if s.pretty {
		now = s.now().UTC()
	}
	for i := range items {
		if s.pretty && items[i].Result != nil {
			s.buf = s.appendPretty(s.buf, now, items[i].Result)
		} else {
			s.buf = append(s.buf, items[i].Payload...)
		}
		s.buf = append(s.buf, '\n')
	}
	if _, err := s.w.Write(s.buf); err != nil {
		return fmt.Errorf("sink: stdout write: %w", err)
	}
	return nil
}

func (s *stdout) appendPretty(dst []byte, now time.Time, r *record.Result) []byte {
	dst = now.AppendFormat(dst, "15:04:05")
	dst = append(dst, "  "...)

	n := len(dst)
	dst = appendPrintable(dst, r.Pipeline)
	s.pipeWidth = max(s.pipeWidth, utf8.RuneCount(dst[n:]))
	dst = appendPadding(dst, s.pipeWidth-utf8.RuneCount(dst[n:])+2)

	n = len(dst)
	dst = appendPrintable(dst, bytesView(r.Key))
	s.keyWidth = max(s.keyWidth, utf8.RuneCount(dst[n:]))
	dst = appendPadding(dst, s.keyWidth-utf8.RuneCount(dst[n:])+2)

	layout := "15:04:05"
	if r.Start%1000 != 0 || r.End%1000 != 0 {
		layout = "15:04:05.000"
	}
	dst = append(dst, '[')
	dst = time.UnixMilli(r.Start).UTC().AppendFormat(dst, layout)
	dst = append(dst, ',')
	dst = time.UnixMilli(r.End).UTC().AppendFormat(dst, layout)
	dst = append(dst, ") "...)
	dst = appendPrintable(dst, r.Kind)
	dst = append(dst, '#')
	dst = strconv.AppendInt(dst, int64(r.Firing), 10)
	dst = append(dst, ' ')
	for i, name := range r.Names {
		dst = append(dst, ' ')
		dst = appendPrintable(dst, name)
		dst = append(dst, '=')
		if i < len(r.Values) {
			dst = appendHumanNumber(dst, r.Values[i])
		}
	}
	return dst
}

// appendPrintable appends s as is when it is printable UTF-8 without spaces
// or control characters, else Go-quoted, so a hostile key cannot move the
// terminal cursor or break the columns.
func appendPrintable(dst []byte, s string) []byte {
	for _, r := range s {
		if r == utf8.RuneError || r <= ' ' || r == 0x7f || r == '"' {
			return strconv.AppendQuote(dst, s)
		}
	}
	return append(dst, s...)
}

func appendPadding(dst []byte, n int) []byte {
	for ; n > 0; n-- {
		dst = append(dst, ' ')
	}
	return dst
}

// appendHumanNumber formats v for people: integers plainly, ordinary
// magnitudes with two decimals, tiny or huge ones with four significant digits.
func appendHumanNumber(dst []byte, v float64) []byte {
	abs := math.Abs(v)
	switch {
	case math.IsNaN(v):
		return append(dst, "null"...)
	case math.IsInf(v, 0):
		return strconv.AppendFloat(dst, v, 'g', -1, 64)
	case v == math.Trunc(v) && abs < 1e15:
		return strconv.AppendInt(dst, int64(v), 10)
	case abs >= 0.01 && abs < 1e15:
		return strconv.AppendFloat(dst, v, 'f', 2, 64)
	default:
		return strconv.AppendFloat(dst, v, 'g', 4, 64)
	}
}

func (s *stdout) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("sink: stdout flush: %w", ErrClosed)
	}
	return nil
}

func (s *stdout) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("sink: stdout close: %w", ErrClosed)
	}
	s.closed = true
	return nil
}

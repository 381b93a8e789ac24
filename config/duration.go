package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// errNegativeDuration is returned by parseDuration for a duration below zero.
var errNegativeDuration = errors.New("config: negative duration")

// maxDays is the largest whole number of days a time.Duration holds.
const maxDays = math.MaxInt64 / int64(24*time.Hour)

// parseDuration parses a non-negative duration written as Go's
// time.ParseDuration accepts ("500ms", "1h30m") with an optional leading
// count of whole days ("1d", "2d12h"), as Go knows no days. A negative value
// returns errNegativeDuration; any other malformed input returns an error
// wrapping the parse failure.
func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("config: empty duration")
	}
	if s[0] == '-' {
		d, err := parseDuration(s[1:])
		if err != nil {
			return 0, err
		}
		if d != 0 {
			return 0, errNegativeDuration
		}
		return 0, nil
	}
	whole := s
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("config: invalid duration %q: days must be a whole number written first, as in \"1d12h\"", whole)
		}
		if n > maxDays {
			return 0, fmt.Errorf("config: duration %q out of range", whole)
		}
		days = time.Duration(n) * 24 * time.Hour
		s = s[i+1:]
		if s == "" {
			return days, nil
		}
		if s[0] == '-' || s[0] == '+' {
			return 0, fmt.Errorf("config: invalid duration %q", whole)
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("config: invalid duration %q: %w", whole, err)
	}
	if d < 0 {
		return 0, errNegativeDuration
	}
	if d > math.MaxInt64-days {
		return 0, fmt.Errorf("config: duration %q out of range", whole)
	}
	return days + d, nil
}

// parseSignedDuration is parseDuration allowing one leading minus sign, for
// window offsets, which may be negative ("-8h": Flink's days starting at
// local midnight in UTC+8).
func parseSignedDuration(s string) (time.Duration, error) {
	rest, neg := strings.CutPrefix(s, "-")
	if !neg {
		return parseDuration(s)
	}
	if rest == "" || rest[0] == '-' || rest[0] == '+' {
		return 0, fmt.Errorf("config: invalid duration %q", s)
	}
	d, err := parseDuration(rest)
	return -d, err
}

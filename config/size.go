package config

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// sizeUnits maps each accepted unit suffix to its multiplier in bytes: SI
// units are powers of 1000, IEC units ("KiB") powers of 1024.
var sizeUnits = []struct {
	suffix string
	bytes  int64
}{
	// Longest suffixes first so "MiB" is not read as "B".
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1},
}

// parseSize parses a non-negative byte count: a plain integer ("4096"), or a
// number with a unit ("64MiB", "1.5GiB", "100MB"). The result is truncated to
// whole bytes. It returns an error for negative, malformed or out-of-range
// values.
func parseSize(s string) (int64, error) {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.bytes
			break
		}
	}
	if num == "" {
		return 0, fmt.Errorf("config: invalid size %q", s)
	}
	if strings.HasPrefix(num, "-") {
		return 0, fmt.Errorf("config: negative size %q", s)
	}
	// Only plain decimals: big.Rat alone would also take fractions ("1/2"),
	// exponents ("1e3", "1p3"), base prefixes ("0x10") and digit
	// separators ("1_000").
	if !isDecimal(num) {
		return 0, fmt.Errorf("config: invalid size %q", s)
	}
	// big.Rat parses decimals exactly, so "0.5KiB" is exactly 512.
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("config: invalid size %q", s)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	n := new(big.Int).Quo(r.Num(), r.Denom())
	if !n.IsInt64() {
		return 0, errors.New("config: size " + s + " out of range")
	}
	return n.Int64(), nil
}

// isDecimal reports whether s is digits with at most one decimal point and at
// least one digit ("64", "1.5", ".5", "5.").
func isDecimal(s string) bool {
	digits, points := 0, 0
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			points++
		default:
			return false
		}
	}
	return digits > 0 && points <= 1
}

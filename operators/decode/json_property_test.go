package decode

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/operators/event"
)

// jsonDepth returns the deepest nesting of objects and arrays in valid JSON.
func jsonDepth(data []byte) int {
	depth, deepest := 0, 0
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// checkAgainstEncodingJSON decodes payload with NewJSON and with
// encoding/json (into map[string]any: last duplicate key wins whole) and
// fails t when they disagree: on acceptance (both ways; except that deeper
// than maxDepth we must reject and a number beyond float64 makes encoding/json
// reject) or on the value of any registered path.
func checkAgainstEncodingJSON(t *testing.T, paths []string, payload []byte) {
	t.Helper()
	schema := mustSchema(t, paths...)
	d := NewJSON(schema)
	var rec event.Record
	rec.Reset(schema.Len())
	rec.Payload = append(rec.Payload, payload...)
	err := d.Decode(&rec)

	var doc any
	stdErr := json.Unmarshal(payload, &doc)
	obj, isObject := doc.(map[string]any)
	valid := json.Valid(payload)
	switch {
	case err == nil && !(valid && isObject):
		t.Fatalf("decoder accepted %q; encoding/json: valid=%v, err=%v", payload, valid, stdErr)
	case err != nil && valid && !bytes.HasPrefix(bytes.TrimSpace(payload), []byte("{")):
		return // not an object: rejecting is right
	case err != nil && valid:
		if jsonDepth(payload) > maxDepth {
			return
		}
		if de, ok := err.(*Error); ok && de.Reason == ReasonWrongType && stdErr != nil {
			return // a number beyond float64: encoding/json rejects too
		}
		t.Fatalf("decoder rejected valid JSON %q: %v", payload, err)
	case err != nil:
		return
	case stdErr != nil:
		// Valid JSON that encoding/json still refuses: a number beyond
		// float64 where we did not need its value. Its values are partial.
		var typeErr *json.UnmarshalTypeError
		if !errors.As(stdErr, &typeErr) {
			t.Fatalf("decoder accepted %q; encoding/json: %v", payload, stdErr)
		}
		return
	}
	for slot, p := range paths {
		want, found := lookupPath(obj, strings.Split(p, "."))
		got := rec.Fields[slot]
		if !found {
			if got.Kind != event.Missing {
				t.Fatalf("%q: path %s = %s, want missing", payload, p, valueString(got))
			}
			continue
		}
		switch w := want.(type) {
		case nil:
			if got.Kind != event.Null {
				t.Fatalf("%q: path %s = %s, want null", payload, p, valueString(got))
			}
		case bool:
			if got.Kind != event.Bool || got.Truth() != w {
				t.Fatalf("%q: path %s = %s, want %v", payload, p, valueString(got), w)
			}
		case float64:
			if got.Kind != event.Number || math.Float64bits(got.Num) != math.Float64bits(w) {
				t.Fatalf("%q: path %s = %s (%b), want %v (%b)", payload, p, valueString(got), got.Num, w, w)
			}
		case string:
			if got.Kind != event.String || string(got.Str) != w {
				t.Fatalf("%q: path %s = %s, want %q", payload, p, valueString(got), w)
			}
		default: // object or array: the raw text must decode to the same
			var again any
			if got.Kind != event.String || json.Unmarshal(got.Str, &again) != nil || !reflect.DeepEqual(again, want) {
				t.Fatalf("%q: path %s = %s, want raw JSON of %v", payload, p, valueString(got), want)
			}
		}
	}
}

func lookupPath(obj map[string]any, path []string) (any, bool) {
	var v any = obj
	for _, name := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[name]; !ok {
			return nil, false
		}
	}
	return v, true
}

// docGen writes random JSON documents over a small key alphabet, so that
// registered paths, duplicates and non-object intermediates are common.
type docGen struct {
	rng *rand.Rand
	b   []byte
}

var genKeys = []string{"a", "b", "c", "ts", "meta", "rssi", "é"}

func (g *docGen) space() {
	for g.rng.IntN(4) == 0 {
		g.b = append(g.b, " \t\n\r"[g.rng.IntN(4)])
	}
}

func (g *docGen) key() {
	k := genKeys[g.rng.IntN(len(genKeys))]
	if g.rng.IntN(5) == 0 { // spell it with escapes
		g.b = append(g.b, '"')
		for _, r := range k {
			g.b = append(g.b, `\u`...)
			g.b = append(g.b, []byte(strconv.FormatInt(int64(r)|0x10000, 16))[1:]...)
		}
		g.b = append(g.b, '"')
		return
	}
	g.b = strconv.AppendQuote(g.b, k)
}

func (g *docGen) object(depth int) {
	g.b = append(g.b, '{')
	g.space()
	for i, n := 0, g.rng.IntN(5); i < n; i++ {
		if i > 0 {
			g.b = append(g.b, ',')
			g.space()
		}
		g.key()
		g.space()
		g.b = append(g.b, ':')
		g.space()
		g.value(depth + 1)
		g.space()
	}
	g.b = append(g.b, '}')
}

func (g *docGen) value(depth int) {
	switch k := g.rng.IntN(10); {
	case k < 3 && depth < 6:
		g.object(depth)
	case k == 3 && depth < 6:
		g.b = append(g.b, '[')
		for i, n := 0, g.rng.IntN(4); i < n; i++ {
			if i > 0 {
				g.b = append(g.b, ',')
			}
			g.space()
			g.value(depth + 1)
		}
		g.b = append(g.b, ']')
	case k == 4:
		g.b = append(g.b, []string{"true", "false", "null"}[g.rng.IntN(3)]...)
	case k < 7:
		g.number()
	default:
		g.str()
	}
}

func (g *docGen) number() {
	switch g.rng.IntN(6) {
	case 0:
		g.b = strconv.AppendInt(g.b, g.rng.Int64N(2e12)-1e12, 10)
	case 1:
		g.b = strconv.AppendFloat(g.b, g.rng.NormFloat64()*100, 'f', -1, 64)
	case 2:
		g.b = strconv.AppendFloat(g.b, g.rng.NormFloat64()*math.Pow(10, float64(g.rng.IntN(600)-300)), 'e', -1, 64)
	case 3: // many digits: the long-number path
		if g.rng.IntN(2) == 0 {
			g.b = append(g.b, '-')
		}
		g.b = append(g.b, byte('1'+g.rng.IntN(9)))
		for range g.rng.IntN(40) {
			g.b = append(g.b, byte('0'+g.rng.IntN(10)))
		}
		if g.rng.IntN(2) == 0 {
			g.b = append(g.b, '.')
			for range 1 + g.rng.IntN(30) {
				g.b = append(g.b, byte('0'+g.rng.IntN(10)))
			}
		}
		if g.rng.IntN(2) == 0 {
			g.b = append(g.b, "eE"[g.rng.IntN(2)])
			g.b = append(g.b, []string{"", "+", "-"}[g.rng.IntN(3)]...)
			g.b = strconv.AppendInt(g.b, int64(g.rng.IntN(300)), 10)
		}
	case 4:
		g.b = append(g.b, []string{"0", "-0", "0.0", "-0.0e0", "1E2", "0e-5"}[g.rng.IntN(6)]...)
	default:
		g.b = strconv.AppendFloat(g.b, float64(g.rng.Int64N(1e15))/1000, 'f', 3, 64)
	}
}

func (g *docGen) str() {
	g.b = append(g.b, '"')
	for range g.rng.IntN(12) {
		switch g.rng.IntN(12) {
		case 0:
			g.b = append(g.b, []string{`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`}[g.rng.IntN(8)]...)
		case 1:
			g.b = append(g.b, `\u`...)
			g.b = append(g.b, []byte(strconv.FormatInt(int64(g.rng.IntN(0x10000))|0x10000, 16))[1:]...)
		case 2:
			g.b = append(g.b, []string{`\ud83d\ude00`, `\ud83d`, `\ude00`, `\uD834\uDD1E`}[g.rng.IntN(4)]...)
		case 3:
			g.b = append(g.b, []string{"é", "☃", "😀", "\xff", "\xe2\x98", "\xed\xa0\x80"}[g.rng.IntN(6)]...)
		default:
			g.b = append(g.b, byte('a'+g.rng.IntN(26)))
		}
	}
	g.b = append(g.b, '"')
}

func randomPaths(rng *rand.Rand) []string {
	seen := map[string]bool{}
	var paths []string
	for range 1 + rng.IntN(6) {
		parts := make([]string, 1+rng.IntN(3))
		for i := range parts {
			parts[i] = genKeys[rng.IntN(len(genKeys))]
		}
		p := strings.Join(parts, ".")
		if !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	return paths
}

// TestJSON_Decode_MatchesEncodingJSON is the equivalence property: on random
// documents, every registered path decodes to what encoding/json gives.
func TestJSON_Decode_MatchesEncodingJSON(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for range n {
		g := docGen{rng: rng}
		g.space()
		g.object(1)
		g.space()
		checkAgainstEncodingJSON(t, randomPaths(rng), g.b)
	}
}

// TestParseFloat_MatchesStrconv checks the fast and long-number paths.
func TestParseFloat_MatchesStrconv(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	for range 200000 {
		g := docGen{rng: rng}
		g.number()
		want, err := strconv.ParseFloat(string(g.b), 64)
		got, ok := parseFloat(g.b)
		if ok != (err == nil) || ok && math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("parseFloat(%s) = %v, %v; strconv: %v, %v", g.b, got, ok, want, err)
		}
	}
	// Halfway cases: 2^53+1 written with trailing digits that decide.
	for _, s := range []string{
		"9007199254740993", "9007199254740993.0000000000000000000000001",
		"9007199254740992.99999999999999999999999999999999999",
		"9007199254740993.00000000000000000000000000000000000",
		"2.2250738585072011e-308", "2.225073858507201136057409796709131975934819546351645648e-308",
		"1797693134862315808e289", "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497791",
	} {
		want, err := strconv.ParseFloat(s, 64)
		got, ok := parseFloat([]byte(s))
		if ok != (err == nil) || ok && math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("parseFloat(%s) = %v, %v; strconv: %v, %v", s, got, ok, want, err)
		}
	}
}

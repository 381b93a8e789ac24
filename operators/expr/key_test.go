package expr

import (
	"errors"
	"testing"

	"github.com/eddy-edge/eddy/operators/event"
)

func TestProgram_EvalBool(t *testing.T) {
	for _, tc := range []struct {
		name    string
		src     string
		fields  fields
		want    bool
		wantErr error
	}{
		{name: "true", src: `event.temp < 200`, fields: fields{"temp": num(10)}, want: true},
		{name: "false", src: `event.temp < 200`, fields: fields{"temp": num(300)}},
		{name: "null is false", src: `event.temp < 200`, fields: fields{"temp": null}},
		{name: "missing is false", src: `event.temp < 200`},
		{name: "number is filter_type", src: `event.temp`, fields: fields{"temp": num(1)}, wantErr: ErrNotBool},
		{name: "string is filter_type", src: `event.temp`, fields: fields{"temp": str("x")}, wantErr: ErrNotBool},
		{name: "bool field", src: `event.ok`, fields: fields{"ok": boolean(true)}, want: true},
		{name: "runtime error", src: `event.temp < 200`, fields: fields{"temp": str("x")}, wantErr: ErrType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schema := event.NewSchema()
			p := mustCompile(t, tc.src, schema)
			got, err := p.EvalBool(newRecord(schema, tc.fields))
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRuntimeError_Message(t *testing.T) {
	schema := event.NewSchema()
	p := mustCompile(t, `event.temp * 2`, schema)
	_, err := p.EvalErr(newRecord(schema, fields{"temp": str("hot")}))
	var re *RuntimeError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want *RuntimeError", err)
	}
	want := "expr: test.hcl:1,1-11: left operand of * must be a number, got string"
	if err.Error() != want {
		t.Fatalf("err = %q, want %q", err.Error(), want)
	}
}

func TestProgram_AppendKey(t *testing.T) {
	for _, tc := range []struct {
		name   string
		src    string
		fields fields
		want   string
		ok     bool
	}{
		{name: "string raw", src: `event.device`, fields: fields{"device": str(`d"1`)}, want: `k:d"1`, ok: true},
		{name: "number shortest", src: `event.id`, fields: fields{"id": num(12)}, want: "k:12", ok: true},
		{name: "fraction", src: `event.id`, fields: fields{"id": num(0.1)}, want: "k:0.1", ok: true},
		{name: "bool", src: `event.id`, fields: fields{"id": boolean(false)}, want: "k:false", ok: true},
		{name: "template", src: `"${event.site}/${event.device}"`, fields: fields{"site": str("s"), "device": str("d")}, want: "k:s/d", ok: true},
		{name: "missing", src: `event.device`, want: "k:"},
		{name: "null", src: `event.device`, fields: fields{"device": null}, want: "k:"},
		{name: "runtime error", src: `event.device * 2`, fields: fields{"device": str("x")}, want: "k:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schema := event.NewSchema()
			p := mustCompile(t, tc.src, schema)
			got, ok := p.AppendKey([]byte("k:"), newRecord(schema, tc.fields))
			if string(got) != tc.want || ok != tc.ok {
				t.Fatalf("got %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestCompile_RegistersPaths(t *testing.T) {
	schema := event.NewSchema()
	mustCompile(t, `event.temp != null && event["payload"].sensor.temp < event.temp || has(event.x)`, schema)
	var got []string
	for _, p := range schema.Paths() {
		got = append(got, p.String())
	}
	want := []string{"temp", "payload.sensor.temp", "x"}
	if len(got) != len(want) {
		t.Fatalf("paths = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("paths = %q, want %q", got, want)
		}
	}
}

func TestProgram_Eval_ShortRecord(t *testing.T) {
	// A record reset for a smaller schema reads the extra fields as missing.
	schema := event.NewSchema()
	p := mustCompile(t, `coalesce(event.a, event.b, "none")`, schema)
	rec := &event.Record{}
	rec.Reset(1)
	if got := p.Eval(rec); string(got.Str) != "none" {
		t.Fatalf("got %s", show(got))
	}
}

func TestProgram_Range(t *testing.T) {
	p := mustCompile(t, "  event.temp > 1", event.NewSchema())
	if got, want := p.Range().String(), "test.hcl:1,3-17"; got != want {
		t.Fatalf("Range = %s, want %s", got, want)
	}
}

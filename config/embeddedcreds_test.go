package config

import (
	"strings"
	"testing"
)

const embeddedSinkBase = `broker { listen = "127.0.0.1:1883" }
source "mqtt" "sensors" {
  broker = "embedded"
  topics = ["a/b"]
}
pipeline "p" {
  from = source.mqtt.sensors
  to   = [sink.mqtt.up]
}
sink "mqtt" "up" {
  broker = "%BROKER%"
  topic  = "r/${key}"
`

// TestParse_EmbeddedSinkCredentialsWarn: an MQTT sink on the embedded
// broker that sets username, password or tls gets one warning per setting,
// at its position, with the hint to remove it; the configuration stays
// valid. On an external broker the same settings are silent.
func TestParse_EmbeddedSinkCredentialsWarn(t *testing.T) {
	const hint = "remove it; the agent's own clients connect to the embedded broker through an internal loopback listener."
	for _, tt := range []struct {
		name, broker, attrs string
		want                []string // "line:col: warning: Summary; start of detail"
	}{
		{name: "none", broker: "embedded"},
		{name: "username", broker: "embedded", attrs: `username = "u"`,
			want: []string{`13:12: warning: Argument has no effect; "username" has no effect with broker = "embedded"`}},
		{name: "password", broker: "embedded", attrs: `password = "p"`,
			want: []string{`13:12: warning: Argument has no effect; "password" has no effect with broker = "embedded"`}},
		{name: "tls", broker: "embedded", attrs: "tls {\n  insecure_skip_verify = true\n}",
			want: []string{`13:1: warning: Block has no effect; The tls block has no effect with broker = "embedded"`}},
		{name: "all three", broker: "embedded", attrs: "username = \"u\"\npassword = \"p\"\ntls {}",
			want: []string{
				`13:12: warning: Argument has no effect; "username"`,
				`14:12: warning: Argument has no effect; "password"`,
				`15:1: warning: Block has no effect; The tls block`,
			}},
		{name: "external broker", broker: "ssl://127.0.0.1:8883", attrs: "username = \"u\"\npassword = \"p\"\ntls {}"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.Replace(embeddedSinkBase, "%BROKER%", tt.broker, 1) + tt.attrs + "\n}\n"
			_, diags := Loader{Env: noEnv, DeviceID: fixedDeviceID}.Parse([]byte(src), "test.hcl")
			if diags.HasErrors() {
				t.Fatalf("Parse:\n%s", FormatDiagnostics(diags))
			}
			var got []string
			for _, line := range strings.Split(FormatDiagnostics(diags), "\n") {
				if strings.Contains(line, "has no effect") {
					got = append(got, line)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("%d warnings, want %d:\n%s", len(got), len(tt.want), strings.Join(got, "\n"))
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i], "test.hcl:"+w) || !strings.HasSuffix(got[i], hint) {
					t.Errorf("warning %d:\n got %s\nwant test.hcl:%s…%s", i, got[i], w, hint)
				}
			}
		})
	}
}

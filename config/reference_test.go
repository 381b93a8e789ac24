package config

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// referenceKey names a block in docs/configuration.md: a top-level block
// with its kind ("source mqtt", "sink file", "upload s3"), anything else by
// its type alone ("window", "timestamp", "tls"): a nested block accepts the
// same attributes wherever it appears (tls's client-only
// insecure_skip_verify aside, which the reference says).
func referenceKey(b *hcl.Block) string {
	switch b.Type {
	case "source", "sink", "upload":
		return b.Type + " " + b.Labels[0]
	}
	return b.Type
}

// acceptedAttributes decodes the configurations at paths and returns, per
// block, every attribute name the decoder accepted there.
func acceptedAttributes(t *testing.T, paths ...string) map[string][]string {
	t.Helper()
	seen := map[string]map[string]bool{}
	l := Loader{Env: noEnv, DeviceID: fixedDeviceID, accepted: func(b *hcl.Block, names []string, _ []hcl.BlockHeaderSchema) {
		k := referenceKey(b)
		if seen[k] == nil {
			seen[k] = map[string]bool{}
		}
		for _, n := range names {
			seen[k][n] = true
		}
	}}
	for _, p := range paths {
		if _, diags := l.Load(p); diags.HasErrors() {
			t.Fatalf("%s: %s", p, FormatDiagnostics(diags))
		}
	}
	// What examples/full.hcl shows only in comments: blocks whose files
	// eddy validate reads (they would have to exist).
	if _, diags := l.Parse([]byte(referenceExtras), "extras.hcl"); diags.HasErrors() {
		t.Fatalf("extras: %s", FormatDiagnostics(diags))
	}
	out := map[string][]string{}
	for k, names := range seen {
		for n := range names {
			out[k] = append(out[k], n)
		}
		sort.Strings(out[k])
	}
	return out
}

// referenceExtras configures what examples/full.hcl shows only in
// comments.
const referenceExtras = `
agent {
  admin_token = "t"
  admin_tls {
    cert      = "/etc/eddy/admin.pem"
    key       = "/etc/eddy/admin.key"
    client_ca = "/etc/eddy/ca.pem"
  }
}
broker {
  listen = "127.0.0.1:1883"
  tls {
    cert = "/etc/eddy/broker.pem"
    key  = "/etc/eddy/broker.key"
    ca   = "/etc/eddy/ca.pem"
  }
}
source "file" "f" { path = "x" }
sink "stdout" "s" {}
pipeline "p" {
  from = source.file.f
  key  = event.k
  window "tumbling" { size = "1m" }
  aggregate { n = count() }
  to = [sink.stdout.s]
}
`

var (
	// referenceHeading is a block's section: ## `agent`, ### `source "mqtt"`.
	referenceHeading = regexp.MustCompile("^#{2,3} `([a-z_]+)(?: \"([a-z0-9_]+)\")?[ `]")
	// referenceRow is an attribute's row: | `name` | default | meaning |.
	referenceRow = regexp.MustCompile("^\\| `([a-z_]+)` \\| ([^|]*) \\|")
)

// documentedAttributes reads docs/configuration.md: per block, the
// attributes of its table, each with its (non-empty) default column.
func documentedAttributes(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	block := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := referenceHeading.FindStringSubmatch(line); m != nil {
			block = strings.TrimSpace(m[1] + " " + m[2])
			continue
		}
		if m := referenceRow.FindStringSubmatch(line); m != nil {
			if block == "" {
				t.Fatalf("docs/configuration.md:%d: attribute row outside a block section", n)
			}
			if strings.TrimSpace(m[2]) == "" {
				t.Errorf("docs/configuration.md:%d: %s.%s has no default (write \"required\" or \"none\")", n, block, m[1])
			}
			out[block] = append(out[block], m[1])
		}
	}
	for k := range out {
		sort.Strings(out[k])
	}
	return out
}

// TestReference_MatchesDecoder: docs/configuration.md documents exactly the
// attributes the decoder accepts, block by block, each with its default.
// The decoder's side is recorded while it decodes examples/full.hcl (every
// block and option) and the cookbook, so a new attribute fails this test
// until it is documented, and a documented one that the decoder does not
// know fails it too.
func TestReference_MatchesDecoder(t *testing.T) {
	want := acceptedAttributes(t, "../examples/full.hcl", "../examples/eddy.hcl", "../examples/failover-regions.hcl")
	got := documentedAttributes(t)
	var blocks []string
	for k := range want {
		blocks = append(blocks, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			blocks = append(blocks, k)
		}
	}
	sort.Strings(blocks)
	for _, k := range blocks {
		for _, a := range want[k] {
			if !slices.Contains(got[k], a) {
				t.Errorf("%s: attribute %q is accepted but not in docs/configuration.md", k, a)
			}
		}
		for _, a := range got[k] {
			if !slices.Contains(want[k], a) {
				t.Errorf("%s: docs/configuration.md documents %q, which the decoder does not accept there", k, a)
			}
		}
	}
	if t.Failed() {
		for _, k := range blocks {
			t.Logf("decoder: %-18s %s", k, strings.Join(want[k], " "))
		}
	}
}

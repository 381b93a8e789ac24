package config

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// fullExample is the configuration that shows every block and attribute.
const fullExample = "../examples/full.hcl"

// blockKey names a block as the configuration reference does: a
// top-level block by its type with its kind label (`source "mqtt"`), a
// nested one by its type alone (`tls`, `watermark`, `window`), as it
// accepts the same attributes wherever it is nested (tls's client-only
// insecure_skip_verify aside). So an attribute one placement rejects, like
// punctuation beside max_out_of_orderness, may be shown in another.
func blockKey(parent string, b *hclsyntax.Block) string {
	switch {
	case parent != "":
		return b.Type
	case b.Type == "source" || b.Type == "sink" || b.Type == "upload":
		return b.Type + ` "` + b.Labels[0] + `"`
	}
	return b.Type
}

// written walks the syntax of a configuration: every block's key by its
// header's range, and per key the attributes and nested block types
// written in it (the union over the blocks of that key).
type written struct {
	paths    map[hcl.Range]string
	attrs    map[string][]string
	children map[string][]string
	labels   map[string][]string // per key, the first labels written (window kinds)
}

func walkWritten(body *hclsyntax.Body, parent string, w *written) {
	for name := range body.Attributes {
		if !slices.Contains(w.attrs[parent], name) {
			w.attrs[parent] = append(w.attrs[parent], name)
		}
	}
	for _, b := range body.Blocks {
		if !slices.Contains(w.children[parent], b.Type) {
			w.children[parent] = append(w.children[parent], b.Type)
		}
		path := blockKey(parent, b)
		w.paths[b.DefRange()] = path
		if len(b.Labels) > 0 && !slices.Contains(w.labels[path], b.Labels[0]) {
			w.labels[path] = append(w.labels[path], b.Labels[0])
		}
		walkWritten(b.Body, path, w)
	}
}

// shownCommented are what full.hcl can only show in comments, each
// counted as shown when a comment line writes it: per block key, nested
// blocks whose files eddy validate reads (they would have to exist), and
// attributes that cannot be written live: the credentials block's belong to
// its provider (one block, so the other providers are commented out), and
// full_every is deprecated (it warns).
var shownCommented = map[string][]string{
	"agent":       {"admin_tls"},
	"broker":      {"tls"},
	"checkpoint":  {"full_every"},
	"credentials": {"endpoint", "role_alias", "thing_name", "cert_file", "key_file", "ca_file", "duration"},
}

// TestFullExample_HasEverything: examples/full.hcl writes every block and
// every attribute the decoder accepts, and every kind of source, sink and
// window. The decoder's side is its schema, recorded block by block while
// it decodes full.hcl, so a new attribute or nested block fails this test,
// named, until full.hcl shows it.
func TestFullExample_HasEverything(t *testing.T) {
	src, err := os.ReadFile(fullExample)
	if err != nil {
		t.Fatal(err)
	}
	file, diags := hclsyntax.ParseConfig(src, fullExample, hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	w := &written{paths: map[hcl.Range]string{}, attrs: map[string][]string{}, children: map[string][]string{}, labels: map[string][]string{}}
	walkWritten(file.Body.(*hclsyntax.Body), "", w)

	schemaAttrs := map[string][]string{}
	schemaBlocks := map[string][]string{}
	for _, b := range rootSchema.Blocks {
		schemaBlocks[""] = append(schemaBlocks[""], b.Type)
	}
	l := Loader{Env: noEnv, DeviceID: fixedDeviceID, accepted: func(b *hcl.Block, names []string, blocks []hcl.BlockHeaderSchema) {
		path, ok := w.paths[b.DefRange]
		if !ok {
			t.Errorf("%s: decoded block %s not found in the file's syntax", b.DefRange, b.Type)
			return
		}
		for _, n := range names {
			if !slices.Contains(schemaAttrs[path], n) {
				schemaAttrs[path] = append(schemaAttrs[path], n)
			}
		}
		for _, bh := range blocks {
			if !slices.Contains(schemaBlocks[path], bh.Type) {
				schemaBlocks[path] = append(schemaBlocks[path], bh.Type)
			}
		}
	}}
	if _, diags := l.Load(fullExample); len(diags) > 0 {
		t.Fatalf("%s:\n%s", fullExample, FormatDiagnostics(diags))
	}

	var paths []string
	for p := range schemaBlocks {
		paths = append(paths, p)
	}
	for p := range schemaAttrs {
		if _, ok := schemaBlocks[p]; !ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		where := p
		if where == "" {
			where = "top level"
		}
		for _, typ := range schemaBlocks[p] {
			if slices.Contains(shownCommented[p], typ) && commentedBlock(string(src), typ) {
				continue
			}
			if !slices.Contains(w.children[p], typ) {
				t.Errorf("%s: no %s block in full.hcl", where, typ)
			}
		}
		for _, n := range schemaAttrs[p] {
			if slices.Contains(w.attrs[p], n) {
				continue
			}
			if slices.Contains(shownCommented[p], n) && commentedSetting(string(src), n) {
				continue
			}
			t.Errorf("%s: attribute %q is not in full.hcl", where, n)
		}
	}

	kinds := []struct {
		path string
		want []string
	}{
		{"source", sourceTypes},
		{"sink", sinkTypes},
		{"window", windowKinds},
	}
	for _, k := range kinds {
		var have []string
		for p, labels := range w.labels {
			if p == k.path || strings.HasPrefix(p, k.path+" ") {
				have = append(have, labels...)
			}
		}
		for _, kind := range k.want {
			if !slices.Contains(have, kind) {
				t.Errorf("%s: no %q kind in full.hcl", k.path, kind)
			}
		}
	}
	for _, p := range []string{CredentialsDefault, CredentialsAWSIoT, CredentialsMinIOSTSCertificate} {
		if !regexp.MustCompile(`(?m)^\s*#?\s*provider\s*=\s*"` + p + `"`).Match(src) {
			t.Errorf("credentials: provider %q is not shown in full.hcl", p)
		}
	}
}

// commentedSetting reports whether src has a comment line setting name,
// like `#   role_alias = "eddy-s3-upload"`.
func commentedSetting(src, name string) bool {
	return regexp.MustCompile(`(?m)^\s*#\s*` + regexp.QuoteMeta(name) + `\s*=`).MatchString(src)
}

// commentedBlock reports whether src has a comment line opening a block of
// type typ, like `# admin_tls {`.
func commentedBlock(src, typ string) bool {
	return regexp.MustCompile(`(?m)^\s*#\s*` + regexp.QuoteMeta(typ) + `\s*\{`).MatchString(src)
}

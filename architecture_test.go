package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestArchitecture_ImportMap holds docs/architecture.md's "Who imports
// whom" list against the code: each package of the module (but the tests'
// and tools' e2e/ and scripts/) counts as the longest name of the list that
// is a prefix of its path, and that name's line must list exactly the other
// names its packages import.
func TestArchitecture_ImportMap(t *testing.T) {
	doc, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := importMap(t, string(doc))
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/eddy-edge/eddy"
	node := func(path string) (string, bool) {
		if path == module {
			return "main", true
		}
		rel, ok := strings.CutPrefix(path, module+"/")
		if !ok {
			return "", false
		}
		best := ""
		for name := range documented {
			if (rel == name || strings.HasPrefix(rel, name+"/")) && len(name) > len(best) {
				best = name
			}
		}
		return best, true
	}
	actual := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.Contains(fields[0], module+"/e2e") || strings.Contains(fields[0], module+"/scripts") {
			continue
		}
		from, _ := node(fields[0])
		if from == "" {
			t.Errorf("package %s is in no line of architecture.md's import list: add it, or the package it belongs to", fields[0])
			continue
		}
		if _, ok := actual[from]; !ok {
			actual[from] = nil
		}
		for _, imp := range fields[1:] {
			if to, ok := node(imp); ok && to != "" && to != from && !slices.Contains(actual[from], to) {
				actual[from] = append(actual[from], to)
			}
		}
	}
	for name, want := range documented {
		got, ok := actual[name]
		if !ok {
			t.Errorf("architecture.md lists %s, which holds no package", name)
			continue
		}
		slices.Sort(got)
		for _, g := range got {
			if !slices.Contains(want, g) {
				t.Errorf("%s imports %s: add it to its line in architecture.md (or remove the import)", name, g)
			}
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("architecture.md says %s imports %s; it does not any more: remove it from the line", name, w)
			}
		}
	}
}

// importMap reads the fenced block after the "Who imports whom" heading:
// "name → a, b, c" per line, or "name → nothing of eddy".
func importMap(t *testing.T, doc string) map[string][]string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "### Who imports whom")
	if !ok {
		t.Fatal(`architecture.md has no "### Who imports whom" section`)
	}
	_, rest, ok = strings.Cut(rest, "```text\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal(`architecture.md's "Who imports whom" has no text block`)
	}
	m := map[string][]string{}
	for line := range strings.Lines(block) {
		from, to, ok := strings.Cut(line, "→")
		if !ok {
			t.Fatalf("architecture.md import list: %q has no →", line)
		}
		from = strings.TrimSpace(from)
		m[from] = []string{}
		if to = strings.TrimSpace(to); to != "nothing of eddy" {
			for _, name := range strings.Split(to, ",") {
				m[from] = append(m[from], strings.TrimSpace(name))
			}
		}
	}
	return m
}

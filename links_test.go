package main

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The repository explains itself: its Markdown links resolve inside it (or
// are http(s) references), and no doc or Go comment sends the reader to a
// design brief or a tracker the repository does not hold.

// mdLink matches an inline Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// outsideRef matches what a reader of the repository alone cannot follow:
// the design brief it grew from (its name in capitals, with or without
// ".md" or "'s"), the folder beside the checkout, the articles it was
// built from, and this project's own issue numbers.
var outsideRef = regexp.MustCompile(`\bDESIGN\b|\.\./shared|\bseeds?/|\b[Ss]eeds? (000|002|004)\b|\b[Ii]ssues? #?\d+`)

// publicIssue matches another project's issue, a public reference, named
// after its project: "paho's issue 788", "its issue 788",
// "mosquitto's issue 2876", "golang/go#75804".
var publicIssue = regexp.MustCompile(`(paho\S*|mosquitto\S*|[Ii]ts|golang/go|Go's) [Ii]ssues? #?\d+`)

// outside returns the first reference in line that leaves the repository,
// or "".
func outside(line string) string {
	for _, loc := range outsideRef.FindAllStringIndex(line, -1) {
		m := line[loc[0]:loc[1]]
		if strings.Contains(strings.ToLower(m), "issue") {
			if p := publicIssue.FindStringIndex(line[max(0, loc[0]-24):loc[1]]); p != nil {
				continue
			}
		}
		return m
	}
	return ""
}

// trackedFiles lists the files git tracks with one of the endings.
func trackedFiles(t *testing.T, endings ...string) []string {
	t.Helper()
	out, err := exec.Command("git", "ls-files").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var files []string
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		for _, e := range endings {
			if strings.HasSuffix(f, e) {
				files = append(files, f)
			}
		}
	}
	if len(files) == 0 {
		t.Fatalf("no tracked %v files", endings)
	}
	return files
}

func TestDocs_LinksStayInRepository(t *testing.T) {
	for _, f := range trackedFiles(t, ".md") {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			if m := outside(line); m != "" {
				t.Errorf("%s:%d: refers outside the repository (%q): say the thing, or cite docs/", f, i+1, m)
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") ||
					strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
					continue
				}
				target, _, _ = strings.Cut(target, "#")
				path := filepath.Join(filepath.Dir(f), target)
				if rel, err := filepath.Rel(".", path); err != nil || strings.HasPrefix(rel, "..") {
					t.Errorf("%s:%d: link %q leaves the repository", f, i+1, m[1])
					continue
				}
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %q: no such file in the repository", f, i+1, m[1])
				}
			}
		}
	}
}

func TestDocs_GoCommentsStayInRepository(t *testing.T) {
	fset := token.NewFileSet()
	for _, f := range trackedFiles(t, ".go") {
		file, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, cg := range file.Comments {
			for _, c := range cg.List {
				for i, line := range strings.Split(c.Text, "\n") {
					if m := outside(line); m != "" {
						t.Errorf("%s:%d: comment refers outside the repository (%q): say the thing, or cite docs/",
							f, fset.Position(c.Pos()).Line+i, m)
					}
				}
			}
		}
	}
}

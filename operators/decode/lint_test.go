package decode

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLint_NoForbiddenImports keeps out what this package decided against:
// encoding/json and encoding/csv (they allocate per message) and unsafe
// (aliasing is done with slices; strconv gets stack strings).
func TestLint_NoForbiddenImports(t *testing.T) {
	forbidden := map[string]bool{"encoding/json": true, "encoding/csv": true, "unsafe": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); forbidden[path] {
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
}

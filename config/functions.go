package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// missingEnvError is the failure of env() for an unset variable without a
// default; eval rewrites it into a diagnostic of its own.
type missingEnvError struct{ name string }

func (e missingEnvError) Error() string {
	return fmt.Sprintf("config: environment variable %q is not set", e.name)
}

// envFunc returns env(NAME [, DEFAULT]): the value of the environment variable
// NAME from lookup; DEFAULT when it is unset; an error when it is unset and
// there is no default. A variable set to "" is set.
func envFunc(lookup func(string) (string, bool)) function.Function {
	return function.New(&function.Spec{
		Description: "Returns the value of an environment variable.",
		Params:      []function.Parameter{{Name: "name", Type: cty.String}},
		VarParam:    &function.Parameter{Name: "default", Type: cty.String},
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			if len(args) > 2 {
				return cty.NilVal, function.NewArgErrorf(2, "env takes a name and at most one default")
			}
			name := args[0].AsString()
			if v, ok := lookup(name); ok {
				return cty.StringVal(v), nil
			}
			if len(args) == 2 {
				return args[1], nil
			}
			return cty.NilVal, missingEnvError{name: name}
		},
	})
}

// fileFunc returns file(PATH): the contents of PATH, relative to dir unless
// absolute, with trailing newlines removed (so a secret file written by echo
// works as a password).
func fileFunc(dir string) function.Function {
	return function.New(&function.Spec{
		Description: "Returns the contents of a file, without trailing newlines.",
		Params:      []function.Parameter{{Name: "path", Type: cty.String}},
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p := args[0].AsString()
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return cty.NilVal, fmt.Errorf("config: read %s: %w", p, err)
			}
			return cty.StringVal(strings.TrimRight(string(b), "\r\n")), nil
		},
	})
}

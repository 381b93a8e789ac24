package agent

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/eddy-edge/eddy/config"
)

// Validate loads the configuration at path and makes every check that Run
// makes before it touches the network or data_dir (checkConfig), without
// starting anything. It returns the diagnostics as
// "file:line:col: ..." lines and whether the configuration has no errors.
func Validate(path string) (report string, ok bool) {
	cfg, diags := config.Load(path)
	if !diags.HasErrors() {
		diags = append(diags, checkConfig(cfg)...)
		diags = append(diags, unsupported(cfg)...)
	}
	return config.FormatDiagnostics(diags), !diags.HasErrors()
}

// unsupported reports settings the configuration language accepts but this
// build cannot honour, as warnings for validate and errors for run. None
// today.
func unsupported(cfg *config.Config) hcl.Diagnostics { return nil }

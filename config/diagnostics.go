package config

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// FormatDiagnostics renders diags one per line, in order, as
// "file:line:col: error: Summary; Detail" (or "warning:"), without a trailing
// newline. A diagnostic without a Subject omits the position.
func FormatDiagnostics(diags hcl.Diagnostics) string {
	var b strings.Builder
	for i, diag := range diags {
		if i > 0 {
			b.WriteByte('\n')
		}
		if diag.Subject != nil {
			fmt.Fprintf(&b, "%s:%d:%d: ", diag.Subject.Filename, diag.Subject.Start.Line, diag.Subject.Start.Column)
		}
		if diag.Severity == hcl.DiagWarning {
			b.WriteString("warning: ")
		} else {
			b.WriteString("error: ")
		}
		b.WriteString(diag.Summary)
		if diag.Detail != "" {
			b.WriteString("; ")
			b.WriteString(strings.ReplaceAll(diag.Detail, "\n", " "))
		}
	}
	return b.String()
}

package decode

import (
	"errors"
	"fmt"
	"testing"
)

func TestError_Error(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{Reason: ReasonMalformedJSON, Detail: "expected ':' at offset 4"}, "decode: malformed_json: expected ':' at offset 4"},
		{&Error{Reason: ReasonFutureTimestamp}, "decode: future_timestamp"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
		var de *Error
		if wrapped := fmt.Errorf("pipeline p: %w", tt.err); !errors.As(wrapped, &de) || de.Reason != tt.err.Reason {
			t.Errorf("errors.As lost the reason of %v", tt.err)
		}
	}
}

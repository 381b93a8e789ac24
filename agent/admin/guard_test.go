package admin

import (
	"io"
	"net/http"
	"testing"
)

func TestAllowedHosts(t *testing.T) {
	h := allowedHosts{listen: "gateway.lan:8787", names: []string{"eddy.example.com"}}
	tests := []struct {
		host string
		want bool
	}{
		{"127.0.0.1:8787", true},
		{"192.168.1.20:8787", true},
		{"[::1]:8787", true},
		{"localhost:8787", true},
		{"LOCALHOST", true},
		{"gateway.lan:8787", true},
		{"Eddy.Example.com", true},
		{"evil.example:8787", false},
		{"rebind.attacker.test", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := h.allows(tt.host); got != tt.want {
			t.Errorf("allows(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
}

// TestAdmin_RefusesWebPages: a request naming another host (DNS rebinding)
// and a cross-origin POST are refused with 403; a POST without the token
// with 401; the same-origin POST the status page sends, with the token,
// passes the guard (503: this agent has no checkpoints set up).
func TestServer_RefusesWebPages(t *testing.T) {
	const token = "s3cret"
	srv := testServer(t, &fakeAgent{}, Options{Listen: "127.0.0.1:8787", Token: token})
	tests := []struct {
		name    string
		method  string
		path    string
		headers map[string]string
		want    int
	}{
		{"foreign host", "GET", "/api/pipelines",
			map[string]string{"Host": "rebind.attacker.test", "Authorization": "Bearer " + token}, http.StatusForbidden},
		{"foreign host on the open probe", "GET", "/healthz", map[string]string{"Host": "rebind.attacker.test"}, http.StatusForbidden},
		{"cross-site POST", "POST", "/api/savepoint",
			map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://attacker.test", "Authorization": "Bearer " + token}, http.StatusForbidden},
		{"cross-origin POST, Origin only", "POST", "/api/savepoint",
			map[string]string{"Origin": "http://attacker.test", "Authorization": "Bearer " + token}, http.StatusForbidden},
		{"same-origin POST without the token", "POST", "/api/savepoint",
			map[string]string{"Sec-Fetch-Site": "same-origin"}, http.StatusUnauthorized},
		{"same-origin POST", "POST", "/api/savepoint",
			map[string]string{"Sec-Fetch-Site": "same-origin", "Authorization": "Bearer " + token}, http.StatusServiceUnavailable},
		{"non-browser POST", "POST", "/api/savepoint",
			map[string]string{"Authorization": "Bearer " + token}, http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.headers {
				if k == "Host" {
					req.Host = v
					continue
				}
				req.Header.Set(k, v)
			}
			if tt.headers["Origin"] == "" && tt.headers["Sec-Fetch-Site"] == "same-origin" {
				req.Header.Set("Origin", srv.URL)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, resp.StatusCode, b, tt.want)
			}
		})
	}
}

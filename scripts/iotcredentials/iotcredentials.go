// Package iotcredentials stands in, on loopback HTTPS, for AWS IoT Core's
// credentials provider (GET /role-aliases/ALIAS/credentials, authenticated
// by a client certificate and the x-amzn-iot-thingname header), for tests
// of devices that buy temporary S3 keys with their certificate. It hands
// out fixed keys (those the test's S3 server accepts) with an expiration a
// chosen lifetime ahead, and can be taken down and brought back.
package iotcredentials

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/testpki"
)

// Server is a running endpoint.
type Server struct {
	srv  *httptest.Server
	life time.Duration
	down atomic.Bool

	mu      sync.Mutex
	fetches []time.Time // successful fetches
	expires []time.Time // the expiration handed out by each
	refused int         // fetches answered 503 while down
}

// Start runs an endpoint that trusts client certificates of pki's CA with
// common name thing, sent with header x-amzn-iot-thingname: thing, for role
// alias alias, and answers with accessKey and secretKey valid for life.
// It stops when t ends.
func Start(t testing.TB, pki testpki.PKI, thing, alias, accessKey, secretKey string, life time.Duration) *Server {
	s := &Server{life: life}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/role-aliases/"+alias+"/credentials" || r.Header.Get("x-amzn-iot-thingname") != thing ||
			len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].Subject.CommonName != thing {
			http.Error(w, `{"message":"Access Denied"}`, http.StatusForbidden)
			return
		}
		if s.down.Load() {
			s.mu.Lock()
			s.refused++
			s.mu.Unlock()
			http.Error(w, `{"message":"Service Unavailable"}`, http.StatusServiceUnavailable)
			return
		}
		now := time.Now()
		exp := now.Add(s.life)
		s.mu.Lock()
		s.fetches = append(s.fetches, now)
		s.expires = append(s.expires, exp)
		s.mu.Unlock()
		var ans struct {
			Credentials map[string]string `json:"credentials"`
		}
		ans.Credentials = map[string]string{"accessKeyId": accessKey, "secretAccessKey": secretKey,
			"sessionToken": "", "expiration": exp.UTC().Format(time.RFC3339Nano)}
		json.NewEncoder(w).Encode(ans)
	}))
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{pki.Server}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pki.Pool}
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	return s
}

// Endpoint is host:port, as a device's configuration names it.
func (s *Server) Endpoint() string { return strings.TrimPrefix(s.srv.URL, "https://") }

// SetDown makes the endpoint answer 503 (true) or serve again (false).
func (s *Server) SetDown(down bool) { s.down.Store(down) }

// Counts returns the successful and the refused (while down) fetches.
func (s *Server) Counts() (fetches, refused int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.fetches), s.refused
}

// Fetches returns when each successful fetch happened and the expiration
// it handed out.
func (s *Server) Fetches() (at, expires []time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.fetches...), append([]time.Time(nil), s.expires...)
}

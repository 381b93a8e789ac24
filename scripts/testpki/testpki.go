// Package testpki makes throwaway certificate authorities for tests of TLS
// client authentication: a CA that issues certificates for 127.0.0.1 and
// localhost (good for servers and clients alike), written as PEM files, as a
// device or a broker holds them.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a self-signed certificate authority whose files live in one
// directory.
type CA struct {
	// CAFile is the CA certificate (PEM); Pool holds it.
	CAFile string
	Pool   *x509.CertPool
	dir    string
	name   string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
}

// NewCA creates a CA named name and writes its certificate to
// dir/name-ca.pem.
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{CAFile: filepath.Join(dir, name+"-ca.pem"), Pool: x509.NewCertPool(), dir: dir, name: name, cert: cert, key: key}
	ca.Pool.AddCert(cert)
	writePEM(t, ca.CAFile, "CERTIFICATE", der)
	return ca
}

// Issue signs a certificate with common name cn, for 127.0.0.1 and
// localhost and valid for server and client authentication, writes it and
// its key to the CA's directory and returns their paths.
func (ca *CA) Issue(t testing.TB, cn string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = filepath.Join(ca.dir, ca.name+"-"+cn+".pem")
	keyFile = filepath.Join(ca.dir, ca.name+"-"+cn+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

// ClientTLS is a client configuration trusting the CA and presenting
// certFile/keyFile when they are set.
func (ca *CA) ClientTLS(t testing.TB, certFile, keyFile string) *tls.Config {
	t.Helper()
	tc := &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}
	if certFile != "" {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return tc
}

// PKI is a CA with one server and one client certificate.
type PKI struct {
	// CAFile is the CA certificate (PEM); Pool holds it.
	CAFile string
	Pool   *x509.CertPool
	// CertFile and KeyFile are the client certificate, whose common name
	// is the one given to New, and its key (PEM).
	CertFile, KeyFile string
	// Server is a server certificate for 127.0.0.1.
	Server tls.Certificate
}

// New writes a PKI into a temporary directory of t; client is the client
// certificate's common name.
func New(t testing.TB, client string) PKI {
	t.Helper()
	ca := NewCA(t, t.TempDir(), "test")
	p := PKI{CAFile: ca.CAFile, Pool: ca.Pool}
	p.CertFile, p.KeyFile = ca.Issue(t, client)
	sc, sk := ca.Issue(t, "server-127.0.0.1")
	var err error
	if p.Server, err = tls.LoadX509KeyPair(sc, sk); err != nil {
		t.Fatal(err)
	}
	return p
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

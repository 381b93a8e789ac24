package upload

// Credential providers for devices whose identity is an X.509 certificate
// and that hold no long-lived S3 keys. Both hand out temporary credentials;
// the Client's credentialKeeper fetches them again before they expire.

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7/pkg/credentials"
)

// CertificateFiles name a device's TLS client identity and whom it trusts.
type CertificateFiles struct {
	// CertFile and KeyFile are the PEM certificate (chain) and private
	// key. They are read again for every connection, so a rotated
	// certificate is used without a restart.
	CertFile, KeyFile string
	// CAFile is a PEM file of CA certificates trusted in addition to the
	// system's; "" trusts the system's only.
	CAFile string
}

// tlsConfig returns a TLS client configuration presenting the certificate.
// It reads the files once to report a bad one now rather than at the first
// fetch.
func (f CertificateFiles) tlsConfig() (*tls.Config, error) {
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, errors.New("upload: a client certificate needs cert_file and key_file")
	}
	if _, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile); err != nil {
		return nil, fmt.Errorf("upload: client certificate: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CAFile != "" {
		var err error
		if cfg, err = tlsWithCA(f.CAFile); err != nil {
			return nil, err
		}
	}
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		c, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("upload: client certificate: %w", err)
		}
		return &c, nil
	}
	return cfg, nil
}

// AWSIoTOptions configure NewAWSIoTProvider.
type AWSIoTOptions struct {
	// Endpoint is the account's credentials endpoint, host[:port] (aws iot
	// describe-endpoint --endpoint-type iot:CredentialProvider).
	Endpoint string
	// RoleAlias names the IAM role the device assumes.
	RoleAlias string
	// ThingName is sent as x-amzn-iot-thingname; the role's policy may
	// refer to it (credentials-iot:ThingName). "" omits the header.
	ThingName string
	CertificateFiles
}

// awsIoTProvider fetches temporary credentials from AWS IoT Core's
// credentials provider: an HTTPS GET of /role-aliases/<alias>/credentials
// authenticated by the device's client certificate.
type awsIoTProvider struct {
	credentials.Expiry
	url   string
	thing string
	hc    *http.Client
}

// NewAWSIoTProvider returns a minio-go credentials provider for AWS IoT
// Core's credentials provider.
func NewAWSIoTProvider(o AWSIoTOptions) (credentials.Provider, error) {
	if o.Endpoint == "" || o.RoleAlias == "" {
		return nil, errors.New("upload: aws_iot credentials need endpoint and role_alias")
	}
	cfg, err := o.tlsConfig()
	if err != nil {
		return nil, err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = cfg
	host := strings.TrimPrefix(strings.TrimSuffix(o.Endpoint, "/"), "https://")
	return &awsIoTProvider{
		url:   "https://" + host + "/role-aliases/" + url.PathEscape(o.RoleAlias) + "/credentials",
		thing: o.ThingName,
		hc:    &http.Client{Transport: t, Timeout: time.Minute},
	}, nil
}

// maxCredentialsBody bounds the credentials endpoint's answer.
const maxCredentialsBody = 64 << 10

func (p *awsIoTProvider) RetrieveWithCredContext(cc *credentials.CredContext) (credentials.Value, error) {
	req, err := http.NewRequest(http.MethodGet, p.url, nil)
	if err != nil {
		return credentials.Value{}, fmt.Errorf("upload: aws_iot credentials: %w", err)
	}
	if cc != nil && cc.Context != nil {
		req = req.WithContext(cc.Context)
	}
	if p.thing != "" {
		req.Header.Set("x-amzn-iot-thingname", p.thing)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return credentials.Value{}, fmt.Errorf("upload: aws_iot credentials: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCredentialsBody))
	if err != nil {
		return credentials.Value{}, fmt.Errorf("upload: aws_iot credentials from %s: %w", p.url, err)
	}
	if resp.StatusCode != http.StatusOK {
		// The error answer is {"message": "..."}; it holds no secret.
		var e struct{ Message string }
		_ = json.Unmarshal(body, &e)
		return credentials.Value{}, fmt.Errorf("upload: aws_iot credentials from %s: HTTP %d: %.200s", p.url, resp.StatusCode, e.Message)
	}
	var ans struct {
		Credentials struct {
			AccessKeyID     string    `json:"accessKeyId"`
			SecretAccessKey string    `json:"secretAccessKey"`
			SessionToken    string    `json:"sessionToken"`
			Expiration      time.Time `json:"expiration"`
		} `json:"credentials"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		// Not the error's text: it may quote the answer, secrets included.
		return credentials.Value{}, fmt.Errorf("upload: aws_iot credentials from %s: the answer is not the expected JSON", p.url)
	}
	cr := ans.Credentials
	if cr.AccessKeyID == "" || cr.SecretAccessKey == "" || cr.Expiration.IsZero() {
		return credentials.Value{}, fmt.Errorf("upload: aws_iot credentials from %s: the answer lacks accessKeyId, secretAccessKey or expiration", p.url)
	}
	p.SetExpiration(cr.Expiration, 0)
	return credentials.Value{
		AccessKeyID:     cr.AccessKeyID,
		SecretAccessKey: cr.SecretAccessKey,
		SessionToken:    cr.SessionToken,
		Expiration:      cr.Expiration,
		SignerType:      credentials.SignatureV4,
	}, nil
}

func (p *awsIoTProvider) Retrieve() (credentials.Value, error) {
	return p.RetrieveWithCredContext(nil)
}

// MinIOCertificateOptions configure NewMinIOCertificateProvider.
type MinIOCertificateOptions struct {
	// Endpoint is the MinIO server's STS URL, e.g.
	// "https://minio.local:9000" (HTTPS: the certificate is the proof).
	Endpoint string
	// Duration is the credentials' lifetime asked for; the server may
	// grant less. 0: one hour.
	Duration time.Duration
	CertificateFiles
}

// NewMinIOCertificateProvider returns minio-go's provider of MinIO's
// AssumeRoleWithCertificate STS call for the device's client certificate.
func NewMinIOCertificateProvider(o MinIOCertificateOptions) (credentials.Provider, error) {
	if !strings.HasPrefix(o.Endpoint, "https://") {
		return nil, fmt.Errorf("upload: minio_sts_certificate endpoint %q must be an https:// URL", o.Endpoint)
	}
	cfg, err := o.tlsConfig()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("upload: client certificate: %w", err)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = cfg
	return &credentials.STSCertificateIdentity{
		STSEndpoint:          o.Endpoint,
		Certificate:          cert,
		S3CredentialLivetime: o.Duration,
		Client:               &http.Client{Transport: t, Timeout: time.Minute},
	}, nil
}

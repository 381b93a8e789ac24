package upload

// AWS Signature Version 4, header-based, for the S3 service. The facts
// follow AWS's "Authenticating Requests: Using the Authorization Header"
// (S3 API reference):
//
//	CanonicalRequest = Method \n CanonicalURI \n CanonicalQuery \n
//	                   CanonicalHeaders \n SignedHeaders \n HashedPayload
//	StringToSign     = "AWS4-HMAC-SHA256" \n X-Amz-Date \n Scope \n hex(SHA256(CanonicalRequest))
//	Scope            = yyyymmdd/region/s3/aws4_request
//	SigningKey       = HMAC(HMAC(HMAC(HMAC("AWS4"+secret, yyyymmdd), region), "s3"), "aws4_request")
//	Signature        = hex(HMAC(SigningKey, StringToSign))
//
// S3 differs from other services in two ways that matter here: the path is
// URI-encoded once (not twice), and the payload hash is always sent in
// X-Amz-Content-Sha256 (the hex SHA-256, or UNSIGNED-PAYLOAD).

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"sort"
	"strings"
	"time"
)

const (
	sigAlgorithm = "AWS4-HMAC-SHA256"
	// emptySHA256 is the hex SHA-256 of an empty payload.
	emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	// unsignedPayload, as X-Amz-Content-Sha256, signs the request without
	// its body.
	unsignedPayload = "UNSIGNED-PAYLOAD"
	amzDateFormat   = "20060102T150405Z"
)

// credentials are an S3 access key pair and, for temporary credentials, a
// session token. An empty AccessKey means anonymous: requests go unsigned.
type credentials struct {
	AccessKey, SecretKey, SessionToken string
}

func (cr credentials) anonymous() bool { return cr.AccessKey == "" }

// unsignedHeaders are never signed: proxies and the transport may change
// them on the way.
var unsignedHeaders = map[string]bool{
	"authorization":   true,
	"user-agent":      true,
	"content-length":  true,
	"accept-encoding": true,
	"expect":          true,
	"x-amzn-trace-id": true,
}

// signV4 signs req for region at time now. It sets X-Amz-Date,
// X-Amz-Content-Sha256 (payloadSHA256: the body's hex SHA-256, emptySHA256
// or unsignedPayload), X-Amz-Security-Token with a session token, and
// Authorization; it rewrites req.URL.RawPath and RawQuery to their canonical
// encodings so that what is sent is exactly what was signed. Every header
// already in req.Header (but those in unsignedHeaders) and Host are signed,
// so set them all before. Anonymous credentials leave req unsigned.
func signV4(req *http.Request, cr credentials, region, payloadSHA256 string, now time.Time) {
	if cr.anonymous() {
		return
	}
	now = now.UTC()
	amzDate := now.Format(amzDateFormat)
	day := amzDate[:8]
	req.Header.Set("X-Amz-Date", amzDate)
	req.Header.Set("X-Amz-Content-Sha256", payloadSHA256)
	if cr.SessionToken != "" {
		req.Header.Set("X-Amz-Security-Token", cr.SessionToken)
	}

	path := req.URL.Path
	if path == "" {
		path = "/"
	}
	req.URL.RawPath = uriEncode(path, false)
	req.URL.RawQuery = canonicalQuery(req.URL.RawQuery)
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	signed, canonHeaders := canonicalHeaders(req.Header, host)

	var cano strings.Builder
	cano.WriteString(req.Method)
	cano.WriteByte('\n')
	cano.WriteString(req.URL.RawPath)
	cano.WriteByte('\n')
	cano.WriteString(req.URL.RawQuery)
	cano.WriteByte('\n')
	cano.WriteString(canonHeaders)
	cano.WriteByte('\n')
	cano.WriteString(signed)
	cano.WriteByte('\n')
	cano.WriteString(payloadSHA256)
	canoSum := sha256.Sum256([]byte(cano.String()))

	scope := day + "/" + region + "/s3/aws4_request"
	toSign := sigAlgorithm + "\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(canoSum[:])
	key := hmacSHA256([]byte("AWS4"+cr.SecretKey), day)
	key = hmacSHA256(key, region)
	key = hmacSHA256(key, "s3")
	key = hmacSHA256(key, "aws4_request")
	sig := hex.EncodeToString(hmacSHA256(key, toSign))
	req.Header.Set("Authorization", sigAlgorithm+" Credential="+cr.AccessKey+"/"+scope+
		",SignedHeaders="+signed+",Signature="+sig)
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// canonicalHeaders returns the signed header names ("a;b;c") and the
// canonical header block (one "name:value\n" per header, names lower case
// and sorted, values trimmed with inner runs of spaces folded, repeated
// headers joined with commas).
func canonicalHeaders(h http.Header, host string) (signed, block string) {
	names := make([]string, 0, len(h)+1)
	values := make(map[string]string, len(h)+1)
	names = append(names, "host")
	values["host"] = host
	for k, vs := range h {
		lk := strings.ToLower(k)
		if unsignedHeaders[lk] || lk == "host" {
			continue
		}
		folded := make([]string, len(vs))
		for i, v := range vs {
			folded[i] = strings.Join(strings.Fields(v), " ")
		}
		names = append(names, lk)
		values[lk] = strings.Join(folded, ",")
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte(':')
		b.WriteString(values[n])
		b.WriteByte('\n')
	}
	return strings.Join(names, ";"), b.String()
}

// canonicalQuery returns rawQuery with every name and value decoded and
// re-encoded with uriEncode, sorted by name then value; a parameter without
// "=" gets an empty value ("lifecycle" → "lifecycle=").
func canonicalQuery(rawQuery string) string {
	if rawQuery == "" {
		return ""
	}
	parts := strings.Split(rawQuery, "&")
	pairs := make([][2]string, 0, len(parts))
	for _, p := range parts {
		if p == "" {
			continue
		}
		k, v, _ := strings.Cut(p, "=")
		pairs = append(pairs, [2]string{uriEncode(queryUnescape(k), true), uriEncode(queryUnescape(v), true)})
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i][0] != pairs[j][0] {
			return pairs[i][0] < pairs[j][0]
		}
		return pairs[i][1] < pairs[j][1]
	})
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p[0])
		b.WriteByte('=')
		b.WriteString(p[1])
	}
	return b.String()
}

// queryUnescape decodes %XX escapes and "+" (a space in form encoding); an
// invalid escape is kept as it is.
func queryUnescape(s string) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '+':
			b = append(b, ' ')
		case s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		default:
			b = append(b, s[i])
		}
	}
	return string(b)
}

// uriEncode percent-encodes every byte of s but the unreserved characters
// A-Z a-z 0-9 - . _ ~, with upper-case hex digits, as SigV4 requires; "/" is
// kept unless encodeSlash.
func uriEncode(s string, encodeSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isUnreserved(c) || (c == '/' && !encodeSlash) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

func isUnreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

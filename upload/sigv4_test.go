package upload

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSignV4_AWSExamples checks signV4 against the worked examples of AWS's
// S3 API reference, "Signature Calculations for the Authorization Header:
// Transferring Payload in a Single Chunk" (bucket examplebucket, region
// us-east-1, 2013-05-24T00:00:00Z, the documentation's example keys).
func TestSignV4_AWSExamples(t *testing.T) {
	cr := credentials{AccessKey: "AKIAIOSFODNN7EXAMPLE", SecretKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
	at := time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name          string
		method, url   string
		header        map[string]string
		payload       string
		signedHeaders string
		signature     string
	}{
		{
			name: "GET object", method: "GET", url: "https://examplebucket.s3.amazonaws.com/test.txt",
			header:        map[string]string{"Range": "bytes=0-9"},
			payload:       emptySHA256,
			signedHeaders: "host;range;x-amz-content-sha256;x-amz-date",
			signature:     "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
		},
		{
			name: "PUT object", method: "PUT", url: "https://examplebucket.s3.amazonaws.com/test$file.text",
			header: map[string]string{
				"Date":                "Fri, 24 May 2013 00:00:00 GMT",
				"X-Amz-Storage-Class": "REDUCED_REDUNDANCY",
			},
			payload:       "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072", // "Welcome to Amazon S3."
			signedHeaders: "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
			signature:     "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd",
		},
		{
			name: "GET bucket lifecycle", method: "GET", url: "https://examplebucket.s3.amazonaws.com/?lifecycle",
			payload:       emptySHA256,
			signedHeaders: "host;x-amz-content-sha256;x-amz-date",
			signature:     "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543",
		},
		{
			name: "GET bucket (list objects)", method: "GET", url: "https://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J",
			payload:       emptySHA256,
			signedHeaders: "host;x-amz-content-sha256;x-amz-date",
			signature:     "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			signV4(req, cr, "us-east-1", tc.payload, at)
			want := "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request," +
				"SignedHeaders=" + tc.signedHeaders + ",Signature=" + tc.signature
			if got := req.Header.Get("Authorization"); got != want {
				t.Fatalf("Authorization\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestSignV4_SessionTokenSignedAndAnonymousUnsigned(t *testing.T) {
	req, _ := http.NewRequest("GET", "http://127.0.0.1:9000/b/k", nil)
	signV4(req, credentials{AccessKey: "a", SecretKey: "s", SessionToken: "tok"}, "eu-west-1", emptySHA256, time.Unix(0, 0))
	auth := req.Header.Get("Authorization")
	if req.Header.Get("X-Amz-Security-Token") != "tok" || !strings.Contains(auth, "x-amz-security-token") ||
		!strings.Contains(auth, "/19700101/eu-west-1/s3/aws4_request") {
		t.Fatalf("headers %v", req.Header)
	}
	anon, _ := http.NewRequest("GET", "http://127.0.0.1:9000/b/k", nil)
	signV4(anon, credentials{}, "us-east-1", emptySHA256, time.Unix(0, 0))
	if len(anon.Header) != 0 {
		t.Fatalf("anonymous request got headers %v", anon.Header)
	}
}

func TestCanonicalQuery(t *testing.T) {
	cases := []struct{ raw, want string }{
		{"", ""},
		{"lifecycle", "lifecycle="},
		{"prefix=J&max-keys=2", "max-keys=2&prefix=J"},
		{"a-b=1&a=2", "a=2&a-b=1"},
		{"prefix=dev-1%2Ffiles%2F&list-type=2", "list-type=2&prefix=dev-1%2Ffiles%2F"},
		{"continuation-token=a+b%2Bc~", "continuation-token=a%20b%2Bc~"},
		{"x=2&x=1", "x=1&x=2"},
	}
	for _, tc := range cases {
		if got := canonicalQuery(tc.raw); got != tc.want {
			t.Errorf("canonicalQuery(%q) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}

func TestURIEncode(t *testing.T) {
	cases := []struct {
		in          string
		encodeSlash bool
		want        string
	}{
		{"/test$file.text", false, "/test%24file.text"},
		{"/a b/c~d_e-f.g", false, "/a%20b/c~d_e-f.g"},
		{"a/b", true, "a%2Fb"},
		{"é", false, "%C3%A9"},
	}
	for _, tc := range cases {
		if got := uriEncode(tc.in, tc.encodeSlash); got != tc.want {
			t.Errorf("uriEncode(%q, %v) = %q, want %q", tc.in, tc.encodeSlash, got, tc.want)
		}
	}
}

package s3server

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

func TestServer_PutGetRestart(t *testing.T) {
	s := Start(t)
	s.MakeBucket("bkt")
	mc, err := minio.New(s.Endpoint(), &minio.Options{
		Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	body := []byte("hello")
	if _, err := mc.PutObject(ctx, "bkt", "x/y", bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(s.ObjectPath("bkt", "x/y")); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("object file = %q, %v", got, err)
	}
	s.Stop()
	if _, err := mc.StatObject(ctx, "bkt", "x/y", minio.StatObjectOptions{}); err == nil {
		t.Fatal("stopped server answered")
	}
	s.Restart()
	if _, err := mc.StatObject(ctx, "bkt", "x/y", minio.StatObjectOptions{}); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

package s3server

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/upload"
)

func TestServer_PutGetRestart(t *testing.T) {
	s := Start(t)
	s.MakeBucket("bkt")
	c, err := upload.New(upload.Options{Endpoint: s.Endpoint(), Bucket: "bkt", Prefix: "x/", AccessKey: s.AccessKey,
		SecretKey: s.SecretKey, PathStyle: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const name = "00000000000000000001.json"
	if err := c.PutManifest(ctx, name, []byte(`{"hello":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.ObjectPath("bkt", "x/manifests/"+name)); err != nil {
		t.Fatalf("object file: %v", err)
	}
	s.Stop()
	if _, err := c.ListManifests(ctx); err == nil {
		t.Fatal("stopped server answered")
	}
	s.Restart()
	names, err := c.ListManifests(ctx)
	if err != nil || len(names) != 1 || names[0] != name {
		t.Fatalf("after restart: %v %v", names, err)
	}
}

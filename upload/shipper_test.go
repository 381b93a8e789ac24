package upload

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eddy-edge/eddy/scripts/await"
)

// orderTransport records the object keys of PUT requests in order.
type orderTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	puts []string
}

func (o *orderTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := o.next.RoundTrip(r)
	if r.Method == http.MethodPut && err == nil && resp.StatusCode == http.StatusOK {
		o.mu.Lock()
		o.puts = append(o.puts, strings.TrimPrefix(r.URL.Path, "/"+testBucket+"/dev-1/"))
		o.mu.Unlock()
	}
	return resp, err
}

// checkpointFiles writes n files for checkpoint id into dir; file i is
// shared by every checkpoint when shared is true.
type testCheckpoint struct {
	id, manifest string
	data         []byte
	files        []FileRef
}

func makeCheckpoint(t testing.TB, dir string, id int, names ...string) testCheckpoint {
	t.Helper()
	cp := testCheckpoint{id: "cp-" + itoa(id), manifest: itoa(id) + ".json"}
	for _, n := range names {
		h := fnv.New64a()
		h.Write([]byte(n))
		data := stateEntries(64<<10, h.Sum64())
		p, sum := writeFile(t, dir, n, data)
		cp.files = append(cp.files, FileRef{Name: sum + ".snap", LocalPath: p, SHA256: sum, Size: int64(len(data))})
	}
	var refs []string
	for _, f := range cp.files {
		refs = append(refs, f.Name)
	}
	cp.data = []byte(strings.Join(refs, "\n"))
	return cp
}

// itoa formats i (0..99) in two digits, so names sort by number.
func itoa(i int) string { return fmt.Sprintf("%02d", i) }

func referencedLines(m []byte) []string { return strings.Fields(string(m)) }

func runShipper(t testing.TB, s *Shipper) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func fastBackoff(o *ShipperOptions) {
	o.MinBackoff, o.MaxBackoff = 10*time.Millisecond, 100*time.Millisecond
}

func TestShipper_ManifestLast(t *testing.T) {
	env := newEnv(t)
	order := &orderTransport{next: env.requests}
	c := env.client(t, func(o *Options) { o.Transport = order; o.Concurrency = 3 })
	var mu sync.Mutex
	var uploaded []string
	opts := ShipperOptions{OnUploaded: func(id string) { mu.Lock(); uploaded = append(uploaded, id); mu.Unlock() }}
	fastBackoff(&opts)
	s := NewShipper(c, opts, testLogger(t))
	runShipper(t, s)
	dir := t.TempDir()
	cps := []testCheckpoint{
		makeCheckpoint(t, dir, 1, "base", "a1", "b1"),
		makeCheckpoint(t, dir, 2, "base", "a2", "b1"),
		makeCheckpoint(t, dir, 3, "base", "a3", "b3"),
	}
	for _, cp := range cps {
		s.Ship(cp.id, cp.manifest, cp.data, cp.files)
	}
	if err := s.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	order.mu.Lock()
	puts := slices.Clone(order.puts)
	order.mu.Unlock()
	for _, cp := range cps {
		m := slices.Index(puts, "manifests/"+cp.manifest)
		if m < 0 {
			t.Fatalf("manifest %s never uploaded: %v", cp.manifest, puts)
		}
		for _, f := range cp.files {
			if i := slices.Index(puts, "files/"+f.Name); i < 0 || i > m {
				t.Fatalf("file %s at %d, manifest %s at %d: %v", f.Name, i, cp.manifest, m, puts)
			}
		}
	}
	// 6 distinct files, each uploaded once, and 3 manifests.
	if len(puts) != 9 {
		t.Fatalf("%d PUTs, want 9 (files shared by checkpoints go once): %v", len(puts), puts)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(uploaded, ",") != "cp-01,cp-02,cp-03" {
		t.Fatalf("OnUploaded order %v", uploaded)
	}
	st := s.Stats()
	if st.Pending != 0 || st.LastUploadedID != "cp-03" || st.BytesUploaded == 0 || st.Failures != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestShipper_ServerDownThenCatchesUp(t *testing.T) {
	env := newEnv(t)
	c := env.client(t, nil)
	var mu sync.Mutex
	var uploaded, superseded []string
	opts := ShipperOptions{
		MaxPending:   2,
		OnUploaded:   func(id string) { mu.Lock(); uploaded = append(uploaded, id); mu.Unlock() },
		OnSuperseded: func(id string) { mu.Lock(); superseded = append(superseded, id); mu.Unlock() },
	}
	fastBackoff(&opts)
	s := NewShipper(c, opts, testLogger(t))
	runShipper(t, s)
	dir := t.TempDir()

	cp1 := makeCheckpoint(t, dir, 1, "base", "d1")
	s.Ship(cp1.id, cp1.manifest, cp1.data, cp1.files)
	if err := s.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	env.srv.Stop()
	for i := 2; i <= 6; i++ {
		cp := makeCheckpoint(t, dir, i, "base", "d"+itoa(i))
		start := time.Now()
		s.Ship(cp.id, cp.manifest, cp.data, cp.files)
		if d := time.Since(start); d > 50*time.Millisecond {
			t.Fatalf("Ship blocked for %v while the server was down", d)
		}
	}
	await.Until(t, 30*time.Second, func() error {
		if st := s.Stats(); st.Failures < 3 {
			return fmt.Errorf("not 3 failed attempts while the server is down: %+v", st)
		}
		return nil
	})
	st := s.Stats()
	if st.LastUploadedID != "cp-01" || st.Pending == 0 || st.LastError == "" {
		t.Fatalf("stats while down %+v", st)
	}
	// Each waiting checkpoint needs its own file and its manifest; the
	// base they share went up with cp-01.
	if st.PendingObjects != 2*st.Pending {
		t.Fatalf("stats while down %+v: want %d objects pending", st, 2*st.Pending)
	}
	t.Logf("while down: %+v", st)

	env.srv.Restart()
	if err := s.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	st = s.Stats()
	if st.LastUploadedID != "cp-06" || st.Pending != 0 || st.PendingObjects != 0 || st.LastError != "" {
		t.Fatalf("stats after recovery %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	// 5 shipped while down with 2 allowed to wait besides the one in
	// flight: at least 2 superseded, and every checkpoint either uploaded
	// or superseded exactly once.
	if len(superseded) < 2 || len(uploaded)+len(superseded) != 6 || uploaded[len(uploaded)-1] != "cp-06" {
		t.Fatalf("uploaded %v superseded %v", uploaded, superseded)
	}
	names, err := c.ListManifests(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range names {
		data, err := c.GetManifest(ctxT(t), m)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range referencedLines(data) {
			if _, err := c.stat(ctxT(t), c.key(filesDir, f)); err != nil {
				t.Fatalf("manifest %s references %s: %v", m, f, err)
			}
		}
	}
	t.Logf("after recovery: %+v; uploaded %v superseded %v", st, uploaded, superseded)
}

func TestShipper_UnshippableDropped(t *testing.T) {
	env := newEnv(t)
	var mu sync.Mutex
	var dropped []string
	opts := ShipperOptions{OnSuperseded: func(id string) { mu.Lock(); dropped = append(dropped, id); mu.Unlock() }}
	fastBackoff(&opts)
	s := NewShipper(env.client(t, nil), opts, testLogger(t))
	runShipper(t, s)
	dir := t.TempDir()
	cp := makeCheckpoint(t, dir, 1, "gone")
	os.Remove(filepath.Join(dir, "gone"))
	s.Ship(cp.id, cp.manifest, cp.data, cp.files)
	if err := s.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dropped) != 1 || s.Stats().LastUploadedID != "" {
		t.Fatalf("dropped %v stats %+v", dropped, s.Stats())
	}
}

func TestShipper_Retain(t *testing.T) {
	env := newEnv(t)
	c := env.client(t, nil)
	opts := ShipperOptions{}
	fastBackoff(&opts)
	s := NewShipper(c, opts, testLogger(t))
	runShipper(t, s)
	dir := t.TempDir()
	var cps []testCheckpoint
	for i, files := range [][]string{{"base", "i1"}, {"base", "i2"}, {"save", "i3"}, {"base", "i4"}, {"base", "i5"}} {
		cp := makeCheckpoint(t, dir, i+1, files...)
		cps = append(cps, cp)
		s.Ship(cp.id, cp.manifest, cp.data, cp.files)
	}
	if err := s.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// Keep the newest two and the savepoint (checkpoint 3).
	s.Retain([]string{cps[2].manifest, cps[3].manifest, cps[4].manifest}, referencedLines)
	if err := s.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	names, _ := c.ListManifests(ctxT(t))
	if strings.Join(names, ",") != "03.json,04.json,05.json" {
		t.Fatalf("manifests after retention: %v", names)
	}
	files, _ := c.list(ctxT(t), filesDir)
	var want []string
	for _, cp := range cps[2:] {
		for _, f := range cp.files {
			if !slices.Contains(want, f.Name) {
				want = append(want, f.Name)
			}
		}
	}
	slices.Sort(want)
	if strings.Join(files, ",") != strings.Join(want, ",") {
		t.Fatalf("files after retention:\n got %v\nwant %v", files, want)
	}
	if s.Stats().Failures != 0 {
		t.Fatalf("stats %+v", s.Stats())
	}
	// Keeping nothing is refused, not a wipe.
	if _, err := c.Retain(ctxT(t), nil, referencedLines); err == nil {
		t.Fatal("Retain with no manifest to keep succeeded")
	}
}

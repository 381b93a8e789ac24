package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/eddy-edge/eddy/scripts/loopback"
	"github.com/eddy-edge/eddy/scripts/s3server"
)

// s3Result is one row of the restore-from-S3 table.
type s3Result struct {
	keys         int
	bucketBytes  int64         // objects under the device's prefix
	restoreMs    int64         // eddy restore --from s3://… (download, verify, prepare data_dir)
	restoreCPU   time.Duration // its user + system time
	startMs      int64         // the next eddy run: start → admin up (the state rebuild)
	startCPU     time.Duration
	restoredSize string
}

// versitygw is a running S3 server on loopback.
type versitygw struct {
	cmd            *exec.Cmd
	endpoint, root string
	access, secret string
}

func startVersitygw(root string) (*versitygw, error) {
	bin, err := s3server.Binary()
	if err != nil {
		return nil, err
	}
	port, err := loopback.Port()
	if err != nil {
		return nil, err
	}
	v := &versitygw{endpoint: "127.0.0.1:" + strconv.Itoa(port), root: root, access: "eddybench", secret: "eddybench-secret-key"}
	if err := os.MkdirAll(filepath.Join(root, "eddy"), 0o755); err != nil { // the bucket
		return nil, err
	}
	v.cmd = exec.Command(bin, "--port", v.endpoint, "--access", v.access, "--secret", v.secret, "--quiet", "posix", root)
	if err := v.cmd.Start(); err != nil {
		return nil, err
	}
	for range 300 {
		if resp, err := http.Get("http://" + v.endpoint + "/"); err == nil {
			resp.Body.Close()
			return v, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	v.stop()
	return nil, fmt.Errorf("versitygw did not answer on %s", v.endpoint)
}

// eddyAndS3 builds the binary into tmp and starts versitygw on tmp/s3.
func eddyAndS3(tmp string) (string, *versitygw, error) {
	bin, err := buildEddy(tmp)
	if err != nil {
		return "", nil, err
	}
	gw, err := startVersitygw(filepath.Join(tmp, "s3"))
	return bin, gw, err
}

func (v *versitygw) stop() {
	_ = v.cmd.Process.Kill()
	_ = v.cmd.Wait()
}

func (v *versitygw) uploadBlock() string {
	return fmt.Sprintf(`
upload "s3" {
  endpoint   = %q
  bucket     = "eddy"
  secure     = false
  path_style = true
  access_key = %q
  secret_key = %q
}
`, v.endpoint, v.access, v.secret)
}

// restoreFromS3 loads keys keys and takes a savepoint (as (d) does), starts
// the agent again with an upload block so that it ships its newest local
// checkpoint to versitygw, then wipes data_dir and times `eddy restore
// --from s3://…` and the start that follows.
func restoreFromS3(bin, tmp string, gw *versitygw, keys int) (s3Result, error) {
	res := s3Result{keys: keys}
	if _, err := loadState(bin, tmp, keys, false); err != nil {
		return res, err
	}
	dir := filepath.Join(tmp, fmt.Sprintf("state-%d", keys))
	manifests, _ := filepath.Glob(filepath.Join(dir, "data", "checkpoints", "manifests", "*.json"))
	if len(manifests) == 0 {
		return res, fmt.Errorf("no local checkpoint after loading")
	}
	newest, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(manifests[len(manifests)-1]), ".json"), 10, 64)
	if err != nil {
		return res, err
	}
	port, err := loopback.Port()
	if err != nil {
		return res, err
	}
	// A prefix per size keeps each size's objects apart (the device id stays
	// the one data_dir was created with).
	cfg := stateConfig(keys, port, filepath.Join(dir, "out.jsonl")) + strings.Replace(gw.uploadBlock(),
		`bucket     = "eddy"`, fmt.Sprintf("bucket     = \"eddy\"\n  prefix     = \"bench-%d/\"", keys), 1)
	progress("restore-s3: uploading the %d-key checkpoint %d", keys, newest)
	upStart := time.Now()
	ag, err := startAgent(bin, dir, cfg)
	if err != nil {
		return res, err
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		if id, err := ag.metric("eddy_upload_last_id"); err == nil && uint64(id) >= newest {
			break
		}
		if time.Now().After(deadline) {
			ag.kill()
			return res, fmt.Errorf("checkpoint %d not uploaded within 10 minutes: %s", newest, ag.tail())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Progress only (not in the table): agent start to the manifest in
	// the bucket, polled every 200 ms.
	progress("restore-s3: uploaded in %d ms (agent start to manifest in the bucket)", time.Since(upStart).Milliseconds())
	ag.kill() // no final checkpoint: the bucket's newest is the one measured
	prefix := filepath.Join(gw.root, "eddy", fmt.Sprintf("bench-%d", keys))
	_ = filepath.Walk(prefix, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			res.bucketBytes += fi.Size()
		}
		return nil
	})
	if err := os.RemoveAll(filepath.Join(dir, "data")); err != nil {
		return res, err
	}

	progress("restore-s3: restoring %d keys from the bucket", keys)
	cmd := exec.Command(bin, "restore", "-c", filepath.Join(dir, "agent.hcl"), "--from", fmt.Sprintf("s3://eddy/bench-%d/", keys))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	res.restoreMs = time.Since(start).Milliseconds()
	if err != nil {
		return res, fmt.Errorf("eddy restore: %w\n%s", err, out)
	}
	res.restoreCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if !strings.Contains(string(out), fmt.Sprintf("checkpoint %d restored", newest)) {
		return res, fmt.Errorf("eddy restore did not restore checkpoint %d:\n%s", newest, out)
	}

	started := time.Now()
	ag, err = startAgent(bin, dir, cfg)
	if err != nil {
		return res, err
	}
	res.startMs = time.Since(started).Milliseconds()
	if ps, err := sampleProc(ag.pid()); err == nil {
		res.startCPU = ps.cpu
	}
	if _, fields, ok := ag.logLine("restored checkpoint"); ok {
		if b, ok := fields["bytes"].(float64); ok {
			res.restoredSize = mib(b)
		}
	}
	ag.kill()
	return res, nil
}

func runRestoreS3(args []string) error {
	fs := flag.NewFlagSet("restore-s3", flag.ContinueOnError)
	sizes := fs.String("keys", "10000,100000,1000000", "state sizes in keys (one open window each)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "eddybench-restore-s3-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin, gw, err := eddyAndS3(tmp)
	if err != nil {
		return err
	}
	defer gw.stop()
	var rs []s3Result
	for _, s := range splitList(*sizes) {
		var keys int
		if _, err := fmt.Sscan(s, &keys); err != nil {
			return fmt.Errorf("-keys %q: %w", s, err)
		}
		r, err := restoreFromS3(bin, tmp, gw, keys)
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	t := newTable("keys (open windows)", "checkpoint size", "in the bucket (zstd)", "eddy restore --from s3://… (CPU)",
		"then eddy run: start → admin up (CPU)", "total")
	for _, r := range rs {
		t.add(r.keys, strings.TrimSpace(r.restoredSize), mib(float64(r.bucketBytes)),
			fmt.Sprintf("%d ms (%d ms)", r.restoreMs, r.restoreCPU.Milliseconds()),
			fmt.Sprintf("%d ms (%d ms)", r.startMs, r.startCPU.Milliseconds()),
			fmt.Sprintf("%d ms", r.restoreMs+r.startMs))
	}
	fmt.Printf("\n(e) restore from a local S3 server (versitygw on loopback): the newest checkpoint of (d)'s run is uploaded, data_dir wiped, then eddy restore --from s3://… and eddy run; %d CPUs, %s\n\n",
		runtime.NumCPU(), runtime.Version())
	t.write(os.Stdout)
	return nil
}

package upload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// ShipperOptions configure a Shipper. The zero value is usable.
type ShipperOptions struct {
	// MaxPending is how many completed checkpoints may wait for upload
	// besides the one being uploaded. 0: 4. See Shipper for what happens
	// when one more arrives.
	MaxPending int
	// MinBackoff and MaxBackoff bound the wait between failed attempts
	// (exponential, with jitter). 0: 1s and 5m.
	MinBackoff, MaxBackoff time.Duration
	// OnUploaded is called with a checkpoint's id once its manifest is in
	// the bucket, i.e. once it can be restored from there; local retention
	// may then treat it as shipped. OnSuperseded is called with the id of
	// a checkpoint dropped from the queue unshipped (superseded by a newer
	// one, or unshippable because a local file is gone or damaged). Both
	// run on the Shipper's goroutine, outside its lock: keep them short;
	// they may call Ship, Retain and Stats.
	OnUploaded, OnSuperseded func(id string)
	// Now replaces time.Now (tests).
	Now func() time.Time
	// Jitter replaces the random source of backoff jitter; it returns a
	// number in [0, 1) (tests).
	Jitter func() float64
}

// Shipper uploads completed checkpoints in the background: for each, the
// files not yet in the bucket, then the manifest, so a checkpoint exists
// remotely exactly when its manifest does. Failed attempts are retried with
// exponential backoff and jitter for as long as it takes: an uplink that is
// down for hours delays shipping, never the caller.
//
// Queue rule: Ship never blocks. At most MaxPending checkpoints wait, plus the
// one whose attempt is running. When one more arrives, the oldest waiting
// checkpoint is superseded: dropped unshipped, reported by OnSuperseded and
// Stats.Superseded. During a backoff wait no attempt is running, so the
// checkpoint that keeps failing is the oldest waiting one and is superseded
// first. This is safe because a manifest is self-contained (it lists every
// file its restore needs, the incremental chain included): a dropped
// checkpoint costs a recovery point, never the ability to restore a newer
// one. Files already uploaded for it stay until remote retention.
//
// Run drives the Shipper; Ship, Retain, Stats and Flush are safe to call from
// any goroutine, before or while Run runs. Queued checkpoints live in memory
// only: after a restart the caller re-ships local checkpoints newer than the
// newest remote manifest (ListManifests).
type Shipper struct {
	c    *Client
	log  *slog.Logger
	opts ShipperOptions
	bo   backoff

	mu         sync.Mutex
	queue      []*shipment // oldest first
	attempting *shipment
	busy       bool // Run is between taking work and finishing its callbacks
	retainReq  *retainRequest
	// present holds files known to be in the bucket, so steady-state
	// checkpoints cost no request per unchanged file.
	present map[string]bool
	// shipped holds the manifests this Shipper uploaded, so retention
	// reads their references without downloading them.
	shipped map[string][]byte
	stats   Stats
	first   time.Time // when the first checkpoint was shipped to Ship
	wake    chan struct{}
	changed chan struct{} // closed and replaced on every state change
}

type shipment struct {
	id, manifestName string
	manifest         []byte
	files            []FileRef
	takenAt          time.Time
}

type retainRequest struct {
	keep       []string
	referenced func([]byte) []string
}

// Stats describe a Shipper's progress.
type Stats struct {
	// Pending is the number of checkpoints queued, the one uploading
	// included.
	Pending int
	// PendingObjects is how many objects those checkpoints still need in
	// the bucket: their files not known to be there yet (a file two of
	// them share counts once) and a manifest each.
	PendingObjects int
	// BytesUploaded is the bytes the Client has sent (compressed,
	// encrypted, framed), files and manifests.
	BytesUploaded int64
	// LastUploadedID is the newest checkpoint whose manifest is in the
	// bucket ("" before the first); LastUploadedAt is when it was handed to
	// Ship, i.e. when it completed locally.
	LastUploadedID string
	LastUploadedAt time.Time
	// RecoveryPointLag is now − LastUploadedAt: how much a device replaced
	// now from the bucket would lose. Before the first upload it counts
	// from the first Ship call; 0 when nothing was ever shipped.
	RecoveryPointLag time.Duration
	// Failures counts failed attempts (uploads and retention).
	Failures int64
	// Superseded counts checkpoints dropped unshipped.
	Superseded int64
	// LastError is the last failed attempt's error ("" after a success).
	LastError string
}

// NewShipper returns a Shipper that uploads with c. log receives a warning
// per failed attempt and an info line when shipping recovers.
func NewShipper(c *Client, opts ShipperOptions, log *slog.Logger) *Shipper {
	if opts.MaxPending <= 0 {
		opts.MaxPending = 4
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Minute
	}
	opts.MaxBackoff = max(opts.MaxBackoff, opts.MinBackoff)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Jitter == nil {
		opts.Jitter = rand.Float64
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Shipper{
		c: c, log: log, opts: opts,
		bo:      backoff{min: opts.MinBackoff, max: opts.MaxBackoff},
		present: map[string]bool{},
		shipped: map[string][]byte{},
		wake:    make(chan struct{}, 1),
		changed: make(chan struct{}),
	}
}

// Ship queues a completed checkpoint: its manifest (uploaded as
// manifests/<manifestName>) and the files it references. It copies manifest
// and files and returns at once. Call it in checkpoint order; the time of the
// call is taken as the checkpoint's completion time (Stats).
func (s *Shipper) Ship(checkpointID, manifestName string, manifest []byte, files []FileRef) {
	sh := &shipment{
		id: checkpointID, manifestName: manifestName,
		manifest: bytes.Clone(manifest), files: slices.Clone(files),
		takenAt: s.opts.Now(),
	}
	s.mu.Lock()
	if s.first.IsZero() {
		s.first = sh.takenAt
	}
	s.queue = append(s.queue, sh)
	var dropped []string
	for s.waiting() > s.opts.MaxPending {
		i := 0
		if s.queue[0] == s.attempting {
			i = 1
		}
		dropped = append(dropped, s.queue[i].id)
		s.queue = slices.Delete(s.queue, i, i+1)
		s.stats.Superseded++
	}
	s.notifyLocked()
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	for _, id := range dropped {
		s.log.Warn("upload: checkpoint superseded before it was shipped", "checkpoint", id, "by", checkpointID)
		if s.opts.OnSuperseded != nil {
			s.opts.OnSuperseded(id)
		}
	}
}

// waiting is the number of queued checkpoints without a running attempt.
func (s *Shipper) waiting() int {
	if s.attempting != nil {
		return len(s.queue) - 1
	}
	return len(s.queue)
}

// Retain queues remote retention (Client.Retain) to run on the Shipper's
// goroutine between uploads, so it never deletes files a checkpoint being
// shipped needs: the files of queued checkpoints are kept too. A newer
// request replaces one not yet run. A failed run is retried with the
// uploads' backoff.
func (s *Shipper) Retain(keepManifests []string, referenced func(manifest []byte) []string) {
	s.mu.Lock()
	s.retainReq = &retainRequest{keep: slices.Clone(keepManifests), referenced: referenced}
	s.notifyLocked()
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Stats returns the Shipper's current statistics.
func (s *Shipper) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Pending = len(s.queue)
	st.PendingObjects = len(s.queue)
	var missing map[string]bool
	if len(s.queue) > 0 {
		missing = map[string]bool{}
	}
	for _, sh := range s.queue {
		for _, f := range sh.files {
			if !s.present[f.Name] && !missing[f.Name] {
				missing[f.Name] = true
				st.PendingObjects++
			}
		}
	}
	st.BytesUploaded = s.c.Stats().BytesUploaded
	switch {
	case !st.LastUploadedAt.IsZero():
		st.RecoveryPointLag = s.opts.Now().Sub(st.LastUploadedAt)
	case !s.first.IsZero():
		st.RecoveryPointLag = s.opts.Now().Sub(s.first)
	}
	return st
}

// Flush waits until every queued checkpoint is shipped or dropped, no
// retention is pending, and the callbacks of the last one have returned, or
// ctx ends. It needs Run to be running.
func (s *Shipper) Flush(ctx context.Context) error {
	for {
		s.mu.Lock()
		idle := len(s.queue) == 0 && s.retainReq == nil && !s.busy
		ch := s.changed
		s.mu.Unlock()
		if idle {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("upload: flush: %d checkpoints pending: %w", s.Stats().Pending, ctx.Err())
		}
	}
}

func (s *Shipper) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Run ships queued checkpoints until ctx ends, then returns ctx's error. A
// transfer in progress is abandoned; its checkpoint stays queued. Run must
// not be called twice at once.
func (s *Shipper) Run(ctx context.Context) error {
	attempt := 0
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && s.retainReq == nil {
			s.mu.Unlock()
			select {
			case <-s.wake:
			case <-ctx.Done():
				return ctx.Err()
			}
			s.mu.Lock()
		}
		s.busy = true
		var err error
		var uploaded, dropped *shipment
		if req := s.retainReq; req != nil {
			protect := s.queuedFilesLocked()
			s.mu.Unlock()
			var res RetainResult
			res, err = s.c.retain(ctx, req.keep, s.refs(req), protect)
			s.mu.Lock()
			if err == nil {
				s.retained(req, res)
			}
		} else {
			sh := s.queue[0]
			s.attempting = sh
			s.mu.Unlock()
			err = s.ship(ctx, sh)
			s.mu.Lock()
			s.attempting = nil
			switch {
			case err == nil:
				uploaded = sh
				s.removeLocked(sh)
				s.shipped[sh.manifestName] = sh.manifest
				if sh.takenAt.After(s.stats.LastUploadedAt) || s.stats.LastUploadedID == "" {
					s.stats.LastUploadedID, s.stats.LastUploadedAt = sh.id, sh.takenAt
				}
			case unshippable(err):
				dropped = sh
				s.removeLocked(sh)
				s.stats.Superseded++
			}
		}
		if err != nil && ctx.Err() == nil {
			s.stats.Failures++
			s.stats.LastError = err.Error()
		} else if err == nil {
			s.stats.LastError = ""
		}
		s.notifyLocked()
		s.mu.Unlock()

		if ctx.Err() != nil {
			s.mu.Lock()
			s.busy = false
			s.mu.Unlock()
			return ctx.Err()
		}
		switch {
		case uploaded != nil:
			if attempt > 0 {
				s.log.Info("upload: shipping recovered", "checkpoint", uploaded.id, "failed_attempts", attempt)
			}
			attempt = 0
			if s.opts.OnUploaded != nil {
				s.opts.OnUploaded(uploaded.id)
			}
		case dropped != nil:
			s.log.Error("upload: checkpoint cannot be shipped; dropped", "checkpoint", dropped.id, "err", err)
			if s.opts.OnSuperseded != nil {
				s.opts.OnSuperseded(dropped.id)
			}
		case err != nil:
			d := s.bo.delay(attempt, s.opts.Jitter())
			attempt++
			s.log.Warn("upload: shipping failed; retrying", "attempt", attempt, "retry_in", d, "err", err)
			if err := sleepCtx(ctx, d); err != nil {
				s.mu.Lock()
				s.busy = false
				s.mu.Unlock()
				return err
			}
		default:
			attempt = 0
		}
		s.mu.Lock()
		s.busy = false
		s.notifyLocked()
		s.mu.Unlock()
	}
}

// unshippable reports errors that no retry can fix: the checkpoint's local
// files are gone or damaged.
func unshippable(err error) bool {
	return errors.Is(err, ErrLocalMismatch) || errors.Is(err, fs.ErrNotExist)
}

func (s *Shipper) removeLocked(sh *shipment) {
	if i := slices.Index(s.queue, sh); i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
	}
}

func (s *Shipper) queuedFilesLocked() map[string]bool {
	protect := map[string]bool{}
	for _, sh := range s.queue {
		for _, f := range sh.files {
			protect[f.Name] = true
		}
	}
	return protect
}

// refs returns how retention learns a kept manifest's files: from the bytes
// this Shipper uploaded when it has them, else by downloading the manifest.
func (s *Shipper) refs(req *retainRequest) func(context.Context, string) ([]string, error) {
	return func(ctx context.Context, name string) ([]string, error) {
		s.mu.Lock()
		data, ok := s.shipped[name]
		s.mu.Unlock()
		if !ok {
			var err error
			if data, err = s.c.GetManifest(ctx, name); err != nil {
				return nil, err
			}
		}
		return req.referenced(data), nil
	}
}

// retained records a successful retention run.
func (s *Shipper) retained(req *retainRequest, res RetainResult) {
	if s.retainReq == req {
		s.retainReq = nil
	}
	for _, f := range res.Files {
		delete(s.present, f)
	}
	for _, m := range res.Manifests {
		delete(s.shipped, m)
	}
	keep := make(map[string]bool, len(req.keep))
	for _, k := range req.keep {
		keep[k] = true
	}
	for m := range s.shipped {
		if !keep[m] {
			delete(s.shipped, m)
		}
	}
	s.log.Debug("upload: remote retention", "deleted_manifests", len(res.Manifests), "deleted_files", len(res.Files))
}

// ship uploads sh's missing files, Concurrency at a time, then its manifest.
func (s *Shipper) ship(ctx context.Context, sh *shipment) error {
	s.mu.Lock()
	var todo []FileRef
	for _, f := range sh.files {
		if !s.present[f.Name] {
			todo = append(todo, f)
		}
	}
	s.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, s.c.opts.Concurrency)
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var firstErr error
	for _, f := range todo {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(f FileRef) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := s.c.PutFileRef(ctx, f); err != nil {
				errMu.Lock()
				if firstErr == nil {
					firstErr = err
					cancel()
				}
				errMu.Unlock()
				return
			}
			s.mu.Lock()
			s.present[f.Name] = true
			s.mu.Unlock()
		}(f)
	}
	wg.Wait()
	if firstErr != nil {
		return fmt.Errorf("upload: checkpoint %s: %w", sh.id, firstErr)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.c.PutManifest(ctx, sh.manifestName, sh.manifest); err != nil {
		return fmt.Errorf("upload: checkpoint %s: %w", sh.id, err)
	}
	return nil
}

package upload

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/minio/minio-go/v7/pkg/credentials"
)

// standardChain is minio-go's credential chain, which takes the first
// source that has keys:
//
//  1. AWS_ACCESS_KEY_ID (or AWS_ACCESS_KEY), AWS_SECRET_ACCESS_KEY (or
//     AWS_SECRET_KEY) and AWS_SESSION_TOKEN;
//  2. MINIO_ROOT_USER/MINIO_ROOT_PASSWORD (or MINIO_ACCESS_KEY/
//     MINIO_SECRET_KEY);
//  3. the AWS shared credentials file (AWS_SHARED_CREDENTIALS_FILE or
//     ~/.aws/credentials, profile AWS_PROFILE or "default");
//  4. the MinIO client's config (MINIO_SHARED_CREDENTIALS_FILE or
//     ~/.mc/config.json, alias MINIO_ALIAS or "s3");
//  5. IAM: a web identity token (AWS_WEB_IDENTITY_TOKEN_FILE and
//     AWS_ROLE_ARN), the ECS task role, or the EC2 instance role through
//     IMDSv2.
//
// With nothing found requests go unsigned (anonymous).
func standardChain() credentials.Provider {
	return &credentials.Chain{Providers: []credentials.Provider{
		&credentials.EnvAWS{},
		&credentials.EnvMinio{},
		&credentials.FileAWSCredentials{},
		&credentials.FileMinioClient{},
		&credentials.IAM{},
	}}
}

// Refresh timing of credentials that expire.
const (
	// refreshMargin is how long before expiry credentials are fetched
	// again, unless refreshShare of their lifetime is shorter.
	refreshMargin = 5 * time.Minute
	refreshShare  = 0.1
	// credentialBackoffMin and credentialBackoffMax bound the wait between
	// failed fetches.
	credentialBackoffMin = time.Second
	credentialBackoffMax = time.Minute
)

// refreshAt returns when credentials obtained at got and expiring at exp are
// fetched again: refreshMargin before exp, or refreshShare of their
// lifetime before exp when that is shorter. A zero exp (credentials that do
// not expire) gives the zero time: never.
func refreshAt(got, exp time.Time) time.Time {
	if exp.IsZero() {
		return time.Time{}
	}
	life := exp.Sub(got)
	return exp.Add(-min(refreshMargin, time.Duration(float64(life)*refreshShare)))
}

// outage tracks consecutive failed fetches: the first failure of an outage
// is logged, the others only counted, and the wait between them grows.
type outage struct {
	failures int
	since    time.Time
	bo       backoff
}

// failed records a failed fetch at now. It reports whether this failure
// starts an outage (the one to log) and how long to wait before the next
// try; jitter is a random number in [0, 1).
func (o *outage) failed(now time.Time, jitter float64) (first bool, wait time.Duration) {
	if o.failures == 0 {
		o.since = now
	}
	wait = o.bo.delay(o.failures, jitter)
	o.failures++
	return o.failures == 1, wait
}

// succeeded records a successful fetch and returns how many fetches had
// failed before it and since when (0 when there was no outage).
func (o *outage) succeeded() (failures int, since time.Time) {
	failures, since = o.failures, o.since
	o.failures, o.since = 0, time.Time{}
	return failures, since
}

// credentialKeeper holds the credentials of a source whose credentials may
// expire (minio-go's chain with IAM, AWS IoT's credentials provider, MinIO's
// AssumeRoleWithCertificate) and fetches them again in the background
// before they expire (refreshAt). A failed fetch is retried with backoff and
// logged once per outage; until a fetch succeeds, requests keep the
// previous credentials while they are valid, and afterwards wait
// (Client operations call wait) rather than fail.
//
// It is the credentials.Provider minio-go's Client signs with: Retrieve
// hands out the current credentials and IsExpired reports true once newer
// ones are there, so minio-go takes them at its next request. No secret is
// logged or put into an error.
type credentialKeeper struct {
	src    credentials.Provider
	client *http.Client // for the source's requests
	log    *slog.Logger
	now    func() time.Time
	jitter func() float64

	mu      sync.Mutex
	cur     credentials.Value
	have    bool
	expires time.Time // zero: never
	life    time.Duration
	gen     uint64 // counts fetched values
	handed  uint64 // gen of the value minio-go holds
	changed chan struct{}

	start sync.Once
	stop  context.CancelFunc
	done  chan struct{}
}

func newCredentialKeeper(src credentials.Provider, client *http.Client, log *slog.Logger) *credentialKeeper {
	return &credentialKeeper{
		src: src, client: client, log: log, now: time.Now, jitter: rand.Float64,
		changed: make(chan struct{}),
	}
}

// errNoCredentials is returned to minio-go when no valid credentials are
// held; Client operations wait for them first, so it is seen only when
// credentials expire between the wait and the request.
var errNoCredentials = errors.New("upload: no valid S3 credentials yet (fetching)")

// RetrieveWithCredContext returns the current credentials.
func (k *credentialKeeper) RetrieveWithCredContext(*credentials.CredContext) (credentials.Value, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.validLocked(k.now()) {
		return credentials.Value{}, errNoCredentials
	}
	k.handed = k.gen
	return k.cur, nil
}

// Retrieve is RetrieveWithCredContext (the interface's older form).
func (k *credentialKeeper) Retrieve() (credentials.Value, error) {
	return k.RetrieveWithCredContext(nil)
}

// IsExpired reports whether minio-go must retrieve again: newer credentials
// were fetched, or the ones it holds expired.
func (k *credentialKeeper) IsExpired() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.handed != k.gen || !k.validLocked(k.now())
}

func (k *credentialKeeper) validLocked(now time.Time) bool {
	return k.have && (k.expires.IsZero() || now.Before(k.expires))
}

// usableLocked reports whether an operation may start with the credentials
// held: valid for at least a 50th of their lifetime (at most a second)
// more, so that they do not expire between the wait and the requests.
func (k *credentialKeeper) usableLocked(now time.Time) bool {
	headroom := min(time.Second, k.life/50)
	return k.validLocked(now.Add(headroom))
}

// wait starts the background fetching on first use and blocks until usable
// credentials are held or ctx ends.
func (k *credentialKeeper) wait(ctx context.Context) error {
	k.start.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		k.stop, k.done = cancel, make(chan struct{})
		go func() {
			defer close(k.done)
			k.run(ctx)
		}()
	})
	for {
		k.mu.Lock()
		ok, ch := k.usableLocked(k.now()), k.changed
		k.mu.Unlock()
		if ok {
			return nil
		}
		// A value held now can only be expired: wait for a new one.
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// close stops the background fetching.
func (k *credentialKeeper) close() {
	k.start.Do(func() {}) // never start after close
	if k.stop != nil {
		k.stop()
		<-k.done
	}
}

// run fetches credentials until ctx ends: at once, then at refreshAt of
// each value, retrying failures with backoff. Credentials that do not
// expire end it.
func (k *credentialKeeper) run(ctx context.Context) {
	out := outage{bo: backoff{min: credentialBackoffMin, max: credentialBackoffMax}}
	for {
		got := k.now()
		v, err := k.src.RetrieveWithCredContext(&credentials.CredContext{Client: k.client, Context: ctx})
		if ctx.Err() != nil {
			return
		}
		var next time.Duration
		if err != nil {
			first, wait := out.failed(got, k.jitter())
			if first {
				k.log.Error("upload: fetching S3 credentials failed; uploads wait for them, retrying", "err", err)
			}
			next = wait
		} else {
			if n, since := out.succeeded(); n > 0 {
				k.log.Info("upload: S3 credentials fetched again", "failed_attempts", n, "outage", k.now().Sub(since).Round(time.Millisecond))
			}
			at := refreshAt(got, v.Expiration)
			k.mu.Lock()
			k.cur, k.have, k.expires, k.life = v, true, v.Expiration, v.Expiration.Sub(got)
			k.gen++
			close(k.changed)
			k.changed = make(chan struct{})
			k.mu.Unlock()
			if at.IsZero() {
				return
			}
			k.log.Debug("upload: S3 credentials fetched", "expires", v.Expiration, "refresh_at", at)
			next = at.Sub(k.now())
		}
		if sleepCtx(ctx, max(0, next)) != nil {
			return
		}
	}
}

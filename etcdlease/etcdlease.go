// Package etcdlease is a lockswap backend on etcd leases, with fencing and a
// fair (first come, first served) wait queue that is woken by watches, not
// polling.
//
// # Keys
//
// A lock named key lives under the queue prefix
//
//	Options.Prefix + escape(key) + "/"
//
// where escape replaces "%" by "%25" and "/" by "%2F", so that no lock's
// prefix contains another's. Every contender (holder or waiter) puts its own
// key, queue prefix + token, created in one transaction and attached to a
// lease. The contender whose key has the lowest create revision holds the
// lock; each waiter watches the deletion of the key just before its own.
// This is the scheme of etcd's concurrency.Mutex: a Mutex made with
// concurrency.NewMutex(session, locker.QueuePrefix(key)) excludes lockswap
// and is excluded by it.
//
// TryAcquire succeeds only when the queue is empty: one transaction compares
// the create revision of the whole queue prefix with 0 and puts the key.
// Because the queue is FIFO, a non-empty queue always has a holder (its
// first key), so TryAcquire returns ErrHeld exactly when someone holds the
// lock or is about to.
//
// Acquire puts its key and reads its predecessor in the same transaction
// (one round trip when the lock is free), then watches the predecessor's key
// from the revision after that read. A watch that starts at a revision the
// server has not yet reached is "synced" and gets the deletion event as soon
// as it is committed; concurrency.Mutex watches from the read's own revision,
// which the server serves from its unsynced-watcher loop (every 100 ms), so
// its hand-over is up to 100 ms slower.
//
// # Leases
//
// A Locker keeps one lease per whole number of seconds of TTL that its locks
// use (usually one lease in all), granted on first use and kept alive in the
// background with a keepalive every third of the lease's TTL. Acquire and
// Release are then one round trip each, like concurrency.Mutex with a reused
// session; a lease per lock would add a grant and a revoke to every cycle
// (see docs/etcdlease.md for the measurements).
//
// etcd leases are whole seconds, and the server may enforce a minimum (by
// default 1.5 × the election timeout, rounded up: 2 s). A TTL below
// [MinTTL] (1 s) is refused with lockswap.ErrInvalid. A TTL that is not a
// whole number of seconds uses the lease of the next whole second, and the
// server's granted TTL (from the LeaseGrant response) is what counts: a
// holder that crashes is freed after the lease's granted TTL. The lock's own
// validity still follows the TTL asked for: its Deadline is at most start +
// TTL, its Done closes then, and the key is deleted at that deadline unless
// the lock was extended. Deadline is also never later than the lease's
// deadline as this client knows it: the send time of the last acknowledged
// keepalive + the granted TTL - a drift allowance.
//
// # Done
//
// Done closes when the lock is released, at its deadline, when a watch on
// the key sees it deleted (by anyone), when a keepalive finds the lease gone,
// and when the lease's TTL passes without an acknowledged keepalive (a
// client cut off from etcd): that last check is timed from the send time of
// the keepalive, so it fires before the server expires the lease.
//
// # Fencing
//
// Fence is the create revision of the holder's key: it strictly increases
// across holders. [IsOwner] is a comparison for the caller's own etcd
// transaction, so that a write succeeds only while the lock is still held.
//
// # Outages, deadlines and Close
//
// Every Acquire, TryAcquire, Extend and Release returns within its
// context's deadline plus lockswap.DeadlineGrace (100 ms), the promise of
// every backend (and the scheduling delays of a loaded machine), even
// against an etcd that never answers: requests carry the caller's context,
// and cleanup that must run after the caller gave up (the deletion of a
// queue key whose put may still land, a Release whose outcome is unknown)
// is waited for only within that grace and otherwise continues in the
// background, on the Locker's time, bounded by lockswap.CleanupTimeout:
// Close gives it half a second (while it revokes the leases), then cancels
// it and waits for it. If that cleanup cannot confirm the deletion, the
// lease it used is retired: no new lock uses it, and it is revoked (or left
// to expire) once its last lock ends, which deletes whatever it still
// carries.
//
// A Release that etcd does not answer (unreachable, timed out) returns an
// error matching lockswap.ErrUnavailable at its deadline, and the lock ends
// (Done closes); the kit goes on with the delete in the background (see
// driver.Config.Uncertain), and the retired lease takes the key with it if
// no retry deletes it: the key is gone at the latest one lease TTL after
// etcd is back.
//
// Acquire waits for a held lock until its context ends, but not for an
// outage: once etcd has answered none of its requests for the call's
// lockswap.WithMaxOutage (lockswap.DefaultMaxOutage, 15 s, by default) it
// returns an error matching lockswap.ErrUnavailable, even with
// context.Background(); a negative bound waits through an outage until the
// context ends or the retry policy gives up. A waiter whose watch stays
// quiet checks every few seconds that etcd still answers. Errors that retrying cannot fix (authentication failed,
// permission denied, a request the server refuses as invalid or too large)
// fail at once with lockswap.ErrInvalid.
//
// Close ends waiting Acquires at once with lockswap.ErrClosed, revokes the
// leases (giving up after 500 ms: unrevoked leases, no longer kept alive,
// expire on the server after their TTL) and returns within a second even
// when etcd hangs. Extend and Release after Close return lockswap.ErrClosed.
//
// # The kit
//
// A Locker is a driver of package driver: the kit does the edges of every
// call (closed check, key, TTL and option validation, request deadlines,
// Deadline and Done bookkeeping, one Extend or Release of a lock at a time,
// the retries of a Release whose outcome is unknown, the "etcdlease: op
// key:" prefix of every error), and this package speaks
// only etcd: the leases, the queue transaction, the watch that wakes a waiter
// (Acquire calls the driver's Wait, one attempt that waits on a watch; the
// kit tries again after an outage and keeps the outage bound), the watch
// that finds a held lock lost, and the ownership comparison. A lock Acquire
// returns is the kit's; [IsOwner], [EtcdKey] and [LeaseID] read its etcd
// side.
//
// # Limits
//
// The queue prefix of a key (Prefix + escape(key) + "/") may be at most
// MaxQueuePrefixBytes (500 KiB): a request names it up to three times and
// etcd refuses requests over its --max-request-bytes (1.5 MiB by default).
// Longer keys are refused with lockswap.ErrInvalid before anything is sent.
// Escaping makes "%" and "/" three bytes each. TTLs are accepted in
// [Locker.TTLRange], from [MinTTL] (1 s); a lock that would have no
// validity left when Acquire returns is given back and the attempt fails
// with lockswap.ErrUnavailable, never returned with its Deadline passed. Errors quote keys cut to 200 bytes.
package etcdlease

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/internal/lockstate"
	"github.com/lockswap/lockswap/internal/tlscheck"
)

// Backend is the backend's name in Guarantees and errors.
const Backend = "etcdlease"

// DefaultPrefix is the key prefix used when Options.Prefix is empty.
const DefaultPrefix = "lockswap/"

// DefaultRequestTimeout bounds each request when Options.RequestTimeout is
// zero.
const DefaultRequestTimeout = 5 * time.Second

// DefaultRetry is the policy between Acquire attempts that failed because
// etcd could not be reached (waiting for a held lock needs no retries: it is
// woken by a watch).
var DefaultRetry = lockswap.JitterRetry(50*time.Millisecond, 250*time.Millisecond)

// MaxQueuePrefixBytes is the longest queue prefix (Prefix + escape(key) +
// "/") a Locker accepts: 500 KiB. The put-and-read transaction of Acquire
// (and the put-if-empty one of TryAcquire) carries the prefix three times
// (the key, and a range's start and end), and etcd refuses requests over
// its --max-request-bytes, 1.5 MiB by default (measured: keys above about
// 524,000 bytes fail). A longer key is refused with lockswap.ErrInvalid
// before anything is sent.
const MaxQueuePrefixBytes = 500 << 10

// MaxPermitPrefixBytes is the longest queue prefix a permit of a counting
// semaphore (lockswap.WithPermits) or a read-write hold
// (lockswap.WithRead, lockswap.WithWrite) accepts: 125 KiB, a quarter of
// MaxQueuePrefixBytes. The transaction that puts a permit's queue key
// carries the prefix, or the slot prefix as long, up to ten times (the
// test of an empty queue, the queue key and the slot key with its value,
// and the reads of the queue and of the slots); a reader's read of the
// queue returns every key before its own. A longer key is refused with
// lockswap.ErrInvalid before anything is sent; on keys longer than this,
// a mutex's TryAcquire that finds the key taken does not look for
// permits or read-write holds, since there can be none.
const MaxPermitPrefixBytes = MaxQueuePrefixBytes / 4

// closeRevokeTimeout bounds Close's revocation of the leases, so that Close
// returns within a second even when etcd does not answer.
const closeRevokeTimeout = 500 * time.Millisecond

// probeEvery is how often a waiter whose watch stays quiet checks that
// etcd still answers (at most; a third of the call's outage bound, see
// lockswap.WithMaxOutage, when smaller).
const probeEvery = 5 * time.Second

// Options configure a Locker. The zero value is usable.
type Options struct {
	// Prefix is prepended to every etcd key (default DefaultPrefix).
	Prefix string
	// TTL is the default lock TTL for Acquire and TryAcquire; 0 means
	// lockswap.DefaultTTL. A call's lockswap.WithTTL wins over it.
	TTL time.Duration
	// RequestTimeout bounds each request to etcd (default
	// DefaultRequestTimeout), so that a call fails with ErrUnavailable
	// instead of waiting for a member to come back.
	RequestTimeout time.Duration
	// Retry is Acquire's default policy between attempts that failed with
	// ErrUnavailable; nil means DefaultRetry.
	Retry lockswap.RetryStrategy
	// ClusterSize is the number of etcd members, for Guarantees. Zero means
	// ask the cluster (MemberList) when New makes the Locker, falling back
	// to the number of the client's endpoints; Open takes the number of
	// Config.Endpoints instead (see Config).
	ClusterSize int
	// Logger, when set, receives the events a person must see (a lock
	// lost, a release that failed; see docs/observability.md); nil is
	// silent.
	Logger *slog.Logger
	// LogKeys adds lock keys to the records (off: keys may be sensitive).
	LogKeys bool
}

// Config is what Open needs to build its own client.
type Config struct {
	// Endpoints are the etcd members' client URLs ("127.0.0.1:2379",
	// "https://host:2379").
	Endpoints []string
	// Username and Password authenticate, when set. The password never
	// appears in errors or String.
	Username, Password string
	// TLS, when set, is the client's TLS configuration.
	TLS *tls.Config
	// DialTimeout bounds connecting (default 5 s).
	DialTimeout time.Duration
	// Prefix, TTL, RequestTimeout, Retry, ClusterSize, Logger and LogKeys
	// are as in Options, but for a zero ClusterSize: Open takes the number
	// of Endpoints, without asking the cluster.
	Prefix         string
	TTL            time.Duration
	RequestTimeout time.Duration
	Retry          lockswap.RetryStrategy
	ClusterSize    int
	Logger         *slog.Logger
	LogKeys        bool
}

// Locker is the etcd lockswap.Locker: the kit's driver.Locker (which does
// the edges of every call: validation, deadlines, errors, Deadline and
// Done) around this package's protocol, plus what only etcd has (Client,
// QueuePrefix).
type Locker struct {
	*driver.Locker[*entry]
	c     *clientv3.Client
	own   bool
	opts  Options
	nodes int

	// cancelClient ends the context of an owned client (see OpenContext).
	cancelClient context.CancelFunc

	ctx    context.Context // ends at Close: background work, calls in progress
	cancel context.CancelFunc
	// cleanupCtx ends when Close has revoked the leases (or given up): it
	// bounds the revocation of a lease granted while closing.
	cleanupCtx    context.Context
	cleanupCancel context.CancelFunc
	// bg runs the cleanup that outlives its caller (the deletion of a
	// queue key after a failed attempt, the revocation of a retired
	// lease, a Release's retries): it is the kit's background group, which
	// the kit's Close ends.
	bg driver.Background
	// wg counts the goroutines of the Locker's own machinery: lease grants,
	// keepalives and lock watches. Add is called only under mu while closed
	// is false, so never after Close's Wait began.
	wg sync.WaitGroup

	mu     sync.Mutex
	closed bool
	leases map[int64]*lease    // the lease in use per whole seconds of TTL
	all    map[*lease]struct{} // every lease granted or being granted and not lost, retired ones too
	locks  map[*entry]struct{}

	id        string // random, names this Locker's contender keys
	slotMu    sync.Mutex
	freeSlots []int
	nextSlot  int
}

var _ lockswap.Locker = (*Locker)(nil)

// Open connects to etcd per cfg and returns a Locker that owns the client:
// Close closes it. Errors name the endpoints, never the password. With
// cfg.TLS, Open first runs one TLS handshake with each endpoint (at once,
// within 2 s) and refuses, with an error matching lockswap.ErrInvalid, an
// endpoint whose certificate does not verify. It is OpenContext without a
// deadline: connecting is bounded by cfg.DialTimeout only.
func Open(cfg Config) (*Locker, error) { return OpenContext(context.Background(), cfg) }

// OpenContext is Open within ctx: when ctx ends before the Locker is made
// (a client that authenticates waits for etcd's answer, up to
// cfg.DialTimeout), it closes what it made and returns at once with an
// error matching ctx.Err() and lockswap.ErrUnavailable. ctx bounds the
// opening only, not the Locker's life.
func OpenContext(ctx context.Context, cfg Config) (*Locker, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, fmt.Errorf("%s: no etcd endpoints: %w", Backend, lockswap.ErrInvalid)
	}
	for _, ep := range cfg.Endpoints {
		if strings.TrimSpace(ep) == "" {
			return nil, fmt.Errorf("%s: empty etcd endpoint in %q: %w", Backend, cfg.Endpoints, lockswap.ErrInvalid)
		}
	}
	if cfg.Password != "" && cfg.Username == "" {
		return nil, fmt.Errorf("%s: password given without a username: %w", Backend, lockswap.ErrInvalid)
	}
	if cfg.DialTimeout < 0 {
		return nil, fmt.Errorf("%s: dial timeout %v is negative: %w", Backend, cfg.DialTimeout, lockswap.ErrInvalid)
	}
	opts := Options{Prefix: cfg.Prefix, TTL: cfg.TTL, RequestTimeout: cfg.RequestTimeout, Retry: cfg.Retry, ClusterSize: cfg.ClusterSize,
		Logger: cfg.Logger, LogKeys: cfg.LogKeys}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	dial := cfg.DialTimeout
	if dial == 0 {
		dial = 5 * time.Second
	}
	if cfg.TLS != nil {
		if err := checkCertificates(ctx, cfg.Endpoints, cfg.TLS, min(dial, certCheckTimeout)); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, openEnded(cfg.Endpoints, err)
	}
	// clientv3.Config.Context is the parent of the client's whole life
	// (its cancel kills the client), and New uses it to authenticate. So
	// the client gets a context of its own, which ctx's end cancels only
	// while New runs (stop), and Close for good (cancelClient).
	cctx, cancelClient := context.WithCancel(context.Background())
	ended := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(ended)
		cancelClient()
	})
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		Username:    cfg.Username,
		Password:    cfg.Password,
		TLS:         cfg.TLS,
		DialTimeout: dial,
		Logger:      zap.NewNop(),
		Context:     cctx,
	})
	if !stop() {
		// ctx ended while New ran: the client is dead or failed.
		<-ended
		if c != nil {
			c.Close()
		}
		return nil, openEnded(cfg.Endpoints, ctx.Err())
	}
	if err != nil {
		cancelClient()
		sentinel := classify(err)
		if sentinel == lockswap.ErrInvalid {
			hint := (&Locker{opts: opts}).hint(err)
			return nil, fmt.Errorf("%s: connect to %v: %w: %v (%s)", Backend, cfg.Endpoints, sentinel, redact(err, cfg.Password), hint)
		}
		return nil, fmt.Errorf("%s: connect to %v: %w: %v", Backend, cfg.Endpoints, sentinel, redact(err, cfg.Password))
	}
	if opts.ClusterSize == 0 {
		opts.ClusterSize = len(cfg.Endpoints)
	}
	lk, err := newLocker(ctx, c, opts)
	if err != nil {
		c.Close()
		cancelClient()
		return nil, err
	}
	lk.own, lk.cancelClient = true, cancelClient
	return lk, nil
}

// openEnded is the error of an open whose ctx ended (ctxErr) before the
// Locker was made: an outage as far as the caller can tell.
func openEnded(endpoints []string, ctxErr error) error {
	return fmt.Errorf("%s: connect to %v: %w before the Locker was made: %w", Backend, endpoints, ctxErr, lockswap.ErrUnavailable)
}

// certCheckTimeout bounds Open's check of the endpoints' certificates.
const certCheckTimeout = 2 * time.Second

// checkCertificates runs a TLS handshake with each endpoint at once, each
// within timeout, and returns an error matching lockswap.ErrInvalid that
// names the first endpoint whose certificate did not verify. etcd's gRPC
// client retries such a handshake in the background without reporting it,
// so that every request would go unanswered and look like an outage; the
// check makes it the configuration error it is, at Open. An endpoint that
// cannot be reached is left to the client (an outage, not a mistake).
func checkCertificates(ctx context.Context, endpoints []string, cfg *tls.Config, timeout time.Duration) error {
	errs := make([]error, len(endpoints))
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		addr := ep
		if j := strings.Index(addr, "://"); j >= 0 {
			addr = addr[j+3:]
		}
		wg.Go(func() { errs[i] = tlscheck.ServerCertificate(ctx, addr, cfg, timeout) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("%s: connect to %s: %w: %v (%s)", Backend, endpoints[i], lockswap.ErrInvalid, err, tlscheck.Reason(err))
		}
	}
	return nil
}

// New returns a Locker over a client the caller built and keeps: Close does
// not close it. A nil client is rejected with an error matching
// lockswap.ErrInvalid.
func New(c *clientv3.Client, opts Options) (*Locker, error) {
	if c == nil {
		return nil, fmt.Errorf("%s: nil etcd client: %w", Backend, lockswap.ErrInvalid)
	}
	return newContext(context.Background(), c, opts)
}

// newContext is New within ctx, for a URL opened with a given client:
// asking the cluster for its size (Options.ClusterSize 0) ends with ctx.
func newContext(ctx context.Context, c *clientv3.Client, opts Options) (*Locker, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return newLocker(ctx, c, opts)
}

func (o *Options) validate() error {
	if o.RequestTimeout < 0 {
		return fmt.Errorf("%s: request timeout %v is negative: %w", Backend, o.RequestTimeout, lockswap.ErrInvalid)
	}
	if len(o.Prefix) >= MaxQueuePrefixBytes {
		return fmt.Errorf("%s: prefix of %d bytes leaves no room for keys (the queue prefix may have at most %d): %w",
			Backend, len(o.Prefix), MaxQueuePrefixBytes, lockswap.ErrInvalid)
	}
	if o.ClusterSize < 0 {
		return fmt.Errorf("%s: cluster size %d is negative: %w", Backend, o.ClusterSize, lockswap.ErrInvalid)
	}
	if min, max := ttlRange(); o.TTL != 0 && (o.TTL < min || o.TTL > max) {
		return fmt.Errorf("%s: %w", Backend, errTTLRange(fmt.Sprintf("Options.TTL %v", o.TTL)))
	}
	return nil
}

func newLocker(octx context.Context, c *clientv3.Client, opts Options) (*Locker, error) {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.Retry == nil {
		opts.Retry = DefaultRetry
	}
	nodes := opts.ClusterSize
	if nodes == 0 {
		ctx, cancel := context.WithTimeout(octx, opts.RequestTimeout)
		resp, err := c.MemberList(ctx)
		cancel()
		if err := octx.Err(); err != nil {
			return nil, openEnded(c.Endpoints(), err)
		}
		if err == nil && len(resp.Members) > 0 {
			nodes = len(resp.Members)
		} else {
			nodes = max(1, len(c.Endpoints()))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cctx, ccancel := context.WithCancel(context.Background())
	lk := &Locker{c: c, opts: opts, nodes: nodes, ctx: ctx, cancel: cancel, cleanupCtx: cctx, cleanupCancel: ccancel,
		id: lockstate.NewToken()[:16], leases: map[int64]*lease{}, all: map[*lease]struct{}{}, locks: map[*entry]struct{}{}}
	min, max := ttlRange()
	kl, err := driver.New[*entry](drv{lk}, driver.Config{
		Name:        Backend,
		Guarantees:  Guarantees(nodes),
		TTL:         opts.TTL,
		MinTTL:      min,
		MaxTTL:      max,
		Retry:       opts.Retry,
		CheckKey:    lk.checkKey,
		Fence:       true,
		Permits:     true,
		WaitPermits: true,
		ReadWrite:   true,
		WaitRW:      true,
		Uncertain:   uncertain,
		Background:  &lk.bg,
		Logger:      opts.Logger,
		LogKeys:     opts.LogKeys,
	})
	if err != nil {
		cancel()
		ccancel()
		return nil, err
	}
	lk.Locker = kl
	return lk, nil
}

// MinTTL is the smallest TTL a Locker accepts: etcd's leases are whole
// seconds, so a shorter TTL would run on a lease of at least a second, and
// a holder that crashed would keep the key longer than its TTL said.
const MinTTL = time.Second

// ttlRange is the Locker's TTL range: from MinTTL (1 s) to
// lockswap.MaxTTL (365 days; etcd's own lease limit is far above).
func ttlRange() (min, max time.Duration) {
	return MinTTL, lockswap.MaxTTL
}

// errTTLRange is the error of a default TTL outside ttlRange, what
// naming it ("ttl=500ms").
func errTTLRange(what string) error {
	min, max := ttlRange()
	return fmt.Errorf("%s is outside the accepted range [%v, %v] (etcd leases are whole seconds, at least one): %w", what, min, max, lockswap.ErrInvalid)
}

// checkKey refuses a key whose queue prefix is too large for etcd's
// requests (see MaxQueuePrefixBytes).
func (lk *Locker) checkKey(key string) error {
	if n := len(lk.QueuePrefix(key)); n > MaxQueuePrefixBytes {
		return fmt.Errorf("key too large: its queue prefix (prefix + escaped key, %q and %q counting 3 bytes) is %d bytes, the most is %d (MaxQueuePrefixBytes, from etcd's 1.5 MiB request limit): %w",
			"%", "/", n, MaxQueuePrefixBytes, lockswap.ErrInvalid)
	}
	return nil
}

// Client returns the etcd client the Locker uses (for the caller's own
// transactions guarded by [IsOwner]).
func (lk *Locker) Client() *clientv3.Client { return lk.c }

// String names the backend, endpoints and prefix, without credentials.
func (lk *Locker) String() string {
	return fmt.Sprintf("%s(%s, prefix %q)", Backend, strings.Join(lk.c.Endpoints(), ","), lk.opts.Prefix)
}

// Guarantees returns the etcd backend's guarantees on a cluster of n
// members.
func Guarantees(n int) lockswap.Guarantees {
	if n < 1 {
		n = 1
	}
	return lockswap.Guarantees{
		Backend:             Backend,
		Fencing:             true,
		SurvivesHolderPause: false,
		SurvivesFailover:    true,
		SurvivesRestart:     true,
		Clock:               lockswap.ClockNone,
		Nodes:               n,
		Tolerates:           (n - 1) / 2,
		StaleReleaseSafe:    true,
		Wait:                lockswap.WaitQueue,
		DeadlineOverrun:     lockswap.DeadlineGrace,
		Permits:             true,
		ReadWrite:           true,
		Notes: []string{
			"locks are kept alive by a lease per Locker and TTL in whole seconds: a crashed holder is freed after the lease's granted TTL (at least 1 s, often the server's minimum of 2 s)",
			"a holder paused past its lease loses the lock without knowing until it resumes; guard writes with Fence or etcdlease.IsOwner",
		},
	}
}

// QueuePrefix returns the etcd prefix under which the contenders for key
// put their keys.
func (lk *Locker) QueuePrefix(key string) string {
	return lk.opts.Prefix + escaper.Replace(key) + "/"
}

var escaper = strings.NewReplacer("%", "%25", "/", "%2F")

// Close ends every Acquire still waiting (with an error matching
// lockswap.ErrClosed), stops the background keepalives and watches,
// revokes the Locker's leases (which deletes every key still attached: held
// locks are released and their Done closes) and closes the client if Open
// made it. It returns within about half a second even when etcd does not
// answer: revocation gives up after 500 ms (the leases, no longer kept
// alive, then expire on the server after their TTL, and the error says
// so), and cleanup still running in the background (deletes whose outcome
// was unknown when their caller returned, the kit's and this package's)
// gets half a second (driver.Background, at the same time) to finish,
// then is cancelled: no goroutine of the Locker outlives Close. Extend of
// a lock of a closed Locker returns an error matching lockswap.ErrClosed,
// and so does Release (and lockswap.ErrLost: the revocation released the
// lock).
func (lk *Locker) Close() error {
	lk.mu.Lock()
	if lk.closed {
		lk.mu.Unlock()
		return nil
	}
	lk.closed = true
	leases := make([]*lease, 0, len(lk.all))
	for ls := range lk.all {
		leases = append(leases, ls)
	}
	locks := make([]*entry, 0, len(lk.locks))
	for e := range lk.locks {
		locks = append(locks, e)
	}
	lk.mu.Unlock()
	// Calls in progress, keepalives, watches and grants end now.
	lk.cancel()
	for _, e := range locks {
		e.settle(stateLost)
		e.claim.LoseAtClose()
		e.stopWatch()
	}

	ctx, cancel := context.WithTimeout(lk.cleanupCtx, min(closeRevokeTimeout, lk.opts.RequestTimeout))
	errs := make([]error, len(leases))
	var wg sync.WaitGroup
	for i, ls := range leases {
		select {
		case <-ls.ready:
		default:
			continue // still being granted: the granter revokes it
		}
		if ls.err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := lk.c.Revoke(ctx, ls.id)
			if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
				errs[i] = fmt.Errorf("%s: close: revoke lease %x (it expires on the server after its %v TTL): %w: %w",
					Backend, int64(ls.id), ls.ttl, classify(err), err)
			}
		}()
	}
	// Meanwhile the kit's Close lets the background cleanup (the kit's
	// and ours, one group) finish or cancels it; a delete it cuts short is
	// moot once the revocation went through.
	kitErr := lk.Locker.Close()
	wg.Wait()
	cancel()
	lk.cleanupCancel()
	lk.wg.Wait()
	errs = append(errs, kitErr)
	if lk.own {
		if err := lk.c.Close(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("%s: close client: %w", Backend, err))
		}
		lk.cancelClient()
	}
	return errors.Join(errs...)
}

func (lk *Locker) isClosed() bool {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.closed
}

// callCtx returns ctx, also cancelled when the Locker closes.
func (lk *Locker) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(lk.ctx, cancel)
	return cctx, func() { stop(); cancel() }
}

// errClosed is the error of a call that Close ended.
var errClosed = lockswap.ErrClosed

// closedBecause is the error of a call that Close ended while it failed
// with err.
func closedBecause(err error) error {
	if errors.Is(err, lockswap.ErrClosed) {
		return err
	}
	return fmt.Errorf("%w (%v)", errClosed, err)
}

// errClosedLost is the error of Extend and Release after Close: its
// revocation of the leases released the lock. It matches ErrClosed alone,
// as every call after Close does (every error matches exactly one
// sentinel); the message says the lock is gone.
var errClosedLost = fmt.Errorf("%w: Close revoked its lease, which released the lock", lockswap.ErrClosed)

// classify returns the sentinel an etcd error maps to: ErrInvalid for what
// retrying cannot fix (authentication and permission failures, requests the
// server refuses as invalid or too large), ErrUnavailable for everything
// else (no member reachable, no leader, timeouts).
func classify(err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrAuthFailed), errors.Is(err, rpctypes.ErrPermissionDenied),
		errors.Is(err, rpctypes.ErrInvalidAuthToken), errors.Is(err, rpctypes.ErrAuthNotEnabled),
		errors.Is(err, rpctypes.ErrUserEmpty), errors.Is(err, rpctypes.ErrKeyNotFound),
		errors.Is(err, rpctypes.ErrRoleNotGranted), errors.Is(err, rpctypes.ErrPermissionNotGranted),
		errors.Is(err, rpctypes.ErrUserNotFound), errors.Is(err, rpctypes.ErrRequestTooLarge),
		errors.Is(err, rpctypes.ErrGRPCAuthFailed), errors.Is(err, rpctypes.ErrGRPCPermissionDenied):
		return lockswap.ErrInvalid
	}
	code := codes.OK
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	} else if s, ok := status.FromError(err); ok {
		code = s.Code()
	}
	switch code {
	case codes.PermissionDenied, codes.Unauthenticated, codes.InvalidArgument:
		return lockswap.ErrInvalid
	}
	return lockswap.ErrUnavailable
}

// uncertain reports whether err, an error of a request wrapped by
// Locker.fail, leaves the request's outcome unknown: etcd may have applied
// it or not. That is so when no answer came (the deadline passed, the call
// was cancelled, the connection failed or closed) and when etcd answered
// that a proposal timed out (raft may still commit it). An answer that
// says what happened (a refusal, no leader, too many requests) is definite,
// and so is an error that does not match lockswap.ErrUnavailable.
func uncertain(err error) bool {
	if !errors.Is(err, lockswap.ErrUnavailable) || errors.Is(err, lockswap.ErrClosed) {
		return false
	}
	var answer rpctypes.EtcdError
	if errors.As(err, &answer) {
		return errors.Is(err, rpctypes.ErrTimeout) || errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail) ||
			errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost)
	}
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Unknown:
			return true
		}
		return false
	}
	return true
}

// hint says what to fix for an error that retrying cannot fix.
func (lk *Locker) hint(err error) string {
	switch {
	case errors.Is(err, rpctypes.ErrAuthFailed), errors.Is(err, rpctypes.ErrGRPCAuthFailed),
		errors.Is(err, rpctypes.ErrUserEmpty), errors.Is(err, rpctypes.ErrUserNotFound):
		return "check the username and password (Config.Username, Config.Password)"
	case errors.Is(err, rpctypes.ErrInvalidAuthToken):
		return "the server rejected the auth token: check the credentials and the server's --auth-token setting"
	case errors.Is(err, rpctypes.ErrPermissionDenied), errors.Is(err, rpctypes.ErrGRPCPermissionDenied),
		errors.Is(err, rpctypes.ErrRoleNotGranted), errors.Is(err, rpctypes.ErrPermissionNotGranted):
		return fmt.Sprintf("grant the user's role readwrite permission on the prefix %s (etcdctl role grant-permission --prefix)",
			lockstate.QuoteKey(lk.opts.Prefix))
	case errors.Is(err, rpctypes.ErrRequestTooLarge):
		return "the request exceeds the server's --max-request-bytes: use a shorter key or prefix"
	}
	return "fix the request or the configuration; retrying will not help"
}

// redact removes the password from an error's text.
func redact(err error, password string) string {
	s := err.Error()
	if password != "" {
		s = strings.ReplaceAll(s, password, "***")
	}
	return s
}

// fail wraps an etcd error with its sentinel and the endpoints (once:
// err's own text follows, without being wrapped again when it is a
// lockswap error); the kit adds the backend, the operation and the key.
func (lk *Locker) fail(err error) error {
	sentinel := classify(err)
	where := strings.Join(lk.c.Endpoints(), ",")
	if sentinel == lockswap.ErrInvalid {
		return fmt.Errorf("on %s: %w: %v (%s)", where, sentinel, err, lk.hint(err))
	}
	return fmt.Errorf("on %s: %w: %w", where, sentinel, err)
}

// reqCtx bounds one request by the request timeout and, for Acquire, by the
// end of its outage allowance.
func (lk *Locker) reqCtx(ctx context.Context, ob *driver.Outage) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, lk.reqTimeout(ob))
}

// reqTimeout is how long one request may take: the request timeout, and
// for Acquire no longer than what is left of its outage bound.
func (lk *Locker) reqTimeout(ob *driver.Outage) time.Duration {
	d := lk.opts.RequestTimeout
	if left, bounded := ob.Left(); bounded {
		d = min(d, max(left, time.Millisecond))
	}
	return d
}

// probePeriod is how often a quiet waiter reads the key it waits for:
// probeEvery, or a third of the outage bound when smaller (at least 10 ms),
// so that an outage is noticed in time.
func probePeriod(ob *driver.Outage) time.Duration {
	if ob.Limit() <= 0 {
		return probeEvery
	}
	return min(probeEvery, max(ob.Limit()/3, 10*time.Millisecond))
}

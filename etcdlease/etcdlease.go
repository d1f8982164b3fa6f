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
// default 1.5 × the election timeout, rounded up: 2 s). A TTL that is not a
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
// across holders. [Lock.IsOwner] is a comparison for the caller's own etcd
// transaction, so that a write succeeds only while the lock is still held.
package etcdlease

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/lockstate"
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

// Options configure a Locker. The zero value is usable.
type Options struct {
	// Prefix is prepended to every etcd key (default DefaultPrefix).
	Prefix string
	// RequestTimeout bounds each request to etcd (default
	// DefaultRequestTimeout), so that a call fails with ErrUnavailable
	// instead of waiting for a member to come back.
	RequestTimeout time.Duration
	// Retry is Acquire's default policy between attempts that failed with
	// ErrUnavailable; nil means DefaultRetry.
	Retry lockswap.RetryStrategy
	// ClusterSize is the number of etcd members, for Guarantees. Zero means
	// ask the cluster (MemberList) when the Locker is made, falling back to
	// the number of endpoints.
	ClusterSize int
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
	// Prefix, RequestTimeout, Retry and ClusterSize are as in Options.
	Prefix         string
	RequestTimeout time.Duration
	Retry          lockswap.RetryStrategy
	ClusterSize    int
}

// Locker is the etcd lockswap.Locker.
type Locker struct {
	c     *clientv3.Client
	own   bool
	opts  Options
	nodes int

	ctx    context.Context // ends at Close: background work
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	leases map[int64]*lease
	locks  map[*Lock]struct{}

	id        string // random, names this Locker's contender keys
	slotMu    sync.Mutex
	freeSlots []int
	nextSlot  int
}

var _ lockswap.Locker = (*Locker)(nil)

// Open connects to etcd per cfg and returns a Locker that owns the client:
// Close closes it. Errors name the endpoints, never the password.
func Open(cfg Config) (*Locker, error) {
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
	opts := Options{Prefix: cfg.Prefix, RequestTimeout: cfg.RequestTimeout, Retry: cfg.Retry, ClusterSize: cfg.ClusterSize}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	dial := cfg.DialTimeout
	if dial == 0 {
		dial = 5 * time.Second
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		Username:    cfg.Username,
		Password:    cfg.Password,
		TLS:         cfg.TLS,
		DialTimeout: dial,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		sentinel := classify(err)
		return nil, fmt.Errorf("%s: connect to %v: %w: %v", Backend, cfg.Endpoints, sentinel, redact(err, cfg.Password))
	}
	if opts.ClusterSize == 0 {
		opts.ClusterSize = len(cfg.Endpoints)
	}
	lk, err := newLocker(c, opts)
	if err != nil {
		c.Close()
		return nil, err
	}
	lk.own = true
	return lk, nil
}

// New returns a Locker over a client the caller built and keeps: Close does
// not close it. A nil client is rejected with an error matching
// lockswap.ErrInvalid.
func New(c *clientv3.Client, opts Options) (*Locker, error) {
	if c == nil {
		return nil, fmt.Errorf("%s: nil etcd client: %w", Backend, lockswap.ErrInvalid)
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return newLocker(c, opts)
}

func (o *Options) validate() error {
	if o.RequestTimeout < 0 {
		return fmt.Errorf("%s: request timeout %v is negative: %w", Backend, o.RequestTimeout, lockswap.ErrInvalid)
	}
	if o.ClusterSize < 0 {
		return fmt.Errorf("%s: cluster size %d is negative: %w", Backend, o.ClusterSize, lockswap.ErrInvalid)
	}
	return nil
}

func newLocker(c *clientv3.Client, opts Options) (*Locker, error) {
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
		ctx, cancel := context.WithTimeout(context.Background(), opts.RequestTimeout)
		resp, err := c.MemberList(ctx)
		cancel()
		if err == nil && len(resp.Members) > 0 {
			nodes = len(resp.Members)
		} else {
			nodes = max(1, len(c.Endpoints()))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Locker{c: c, opts: opts, nodes: nodes, ctx: ctx, cancel: cancel, id: lockstate.NewToken()[:16],
		leases: map[int64]*lease{}, locks: map[*Lock]struct{}{}}, nil
}

// Client returns the etcd client the Locker uses (for the caller's own
// transactions guarded by [Lock.IsOwner]).
func (lk *Locker) Client() *clientv3.Client { return lk.c }

// String names the backend, endpoints and prefix, without credentials.
func (lk *Locker) String() string {
	return fmt.Sprintf("%s(%s, prefix %q)", Backend, strings.Join(lk.c.Endpoints(), ","), lk.opts.Prefix)
}

// Guarantees describes the etcd lock on this Locker's cluster.
func (lk *Locker) Guarantees() lockswap.Guarantees { return Guarantees(lk.nodes) }

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
		Notes: []string{
			"locks are kept alive by a lease per Locker and TTL in whole seconds: a crashed holder is freed after the lease's granted TTL (at least 1 s, often the server's minimum of 2 s)",
			"a holder paused past its lease loses the lock without knowing until it resumes; guard writes with Fence or Lock.IsOwner",
		},
	}
}

// QueuePrefix returns the etcd prefix under which the contenders for key
// put their keys.
func (lk *Locker) QueuePrefix(key string) string {
	return lk.opts.Prefix + escaper.Replace(key) + "/"
}

var escaper = strings.NewReplacer("%", "%25", "/", "%2F")

// Close stops the background keepalives, revokes the Locker's leases (which
// deletes every key still attached: held locks are released and their Done
// closes) and closes the client if Open made it.
func (lk *Locker) Close() error {
	lk.mu.Lock()
	if lk.closed {
		lk.mu.Unlock()
		return nil
	}
	lk.closed = true
	leases := make([]*lease, 0, len(lk.leases))
	for _, ls := range lk.leases {
		leases = append(leases, ls)
	}
	locks := make([]*Lock, 0, len(lk.locks))
	for l := range lk.locks {
		locks = append(locks, l)
	}
	lk.mu.Unlock()

	var errs []error
	for _, ls := range leases {
		select {
		case <-ls.ready:
		default:
			continue // still being granted: the granter revokes it
		}
		if ls.err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), lk.opts.RequestTimeout)
		_, err := lk.c.Revoke(ctx, ls.id)
		cancel()
		if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			errs = append(errs, fmt.Errorf("%s: close: revoke lease %x: %w: %w", Backend, int64(ls.id), classify(err), err))
		}
	}
	for _, l := range locks {
		l.settle(stateLost)
		l.End()
		l.stopWatch()
	}
	lk.cancel()
	lk.wg.Wait()
	if lk.own {
		if err := lk.c.Close(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("%s: close client: %w", Backend, err))
		}
	}
	return errors.Join(errs...)
}

// classify returns the sentinel an etcd error maps to: ErrInvalid for
// authentication and permission failures (configuration), ErrUnavailable
// for everything else (no member reachable, no leader, timeouts).
func classify(err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrAuthFailed), errors.Is(err, rpctypes.ErrPermissionDenied),
		errors.Is(err, rpctypes.ErrInvalidAuthToken), errors.Is(err, rpctypes.ErrAuthNotEnabled),
		errors.Is(err, rpctypes.ErrUserEmpty), errors.Is(err, rpctypes.ErrKeyNotFound),
		errors.Is(err, rpctypes.ErrGRPCAuthFailed), errors.Is(err, rpctypes.ErrGRPCPermissionDenied):
		return lockswap.ErrInvalid
	}
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.PermissionDenied, codes.Unauthenticated, codes.InvalidArgument:
			return lockswap.ErrInvalid
		}
	}
	return lockswap.ErrUnavailable
}

// redact removes the password from an error's text.
func redact(err error, password string) string {
	s := err.Error()
	if password != "" {
		s = strings.ReplaceAll(s, password, "***")
	}
	return s
}

func (lk *Locker) fail(op, key string, err error) error {
	return fmt.Errorf("%s: %s %q on %s: %w: %w", Backend, op, key, strings.Join(lk.c.Endpoints(), ","), classify(err), err)
}

func (lk *Locker) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, lk.opts.RequestTimeout)
}

func (lk *Locker) prepare(key string, opts []lockswap.Option) (lockswap.Options, error) {
	lk.mu.Lock()
	closed := lk.closed
	lk.mu.Unlock()
	return lockswap.PrepareAcquire(Backend, closed, key, lk.opts.Retry, opts)
}

// TryAcquire makes one attempt: it takes the lock only when nobody holds or
// waits for it.
func (lk *Locker) TryAcquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	o, err := lk.prepare(key, opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: acquire %q not attempted: %w", Backend, key, err)
	}
	return lk.tryOnce(ctx, key, o.TTL)
}

func (lk *Locker) tryOnce(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	ls, err := lk.lease(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	pfx := lk.QueuePrefix(key)
	token := lockstate.NewToken()
	slot := lk.takeSlot()
	myKey := lk.contenderKey(pfx, slot)
	start := time.Now()
	rctx, cancel := lk.reqCtx(ctx)
	resp, err := lk.c.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(pfx), "=", 0).WithPrefix()).
		Then(clientv3.OpPut(myKey, token, clientv3.WithLease(ls.id))).
		Commit()
	cancel()
	if err != nil {
		lk.removeKey(ctx, myKey, slot)
		return nil, lk.fail("acquire", key, err)
	}
	if !resp.Succeeded {
		lk.putSlot(slot) // nothing was written
		return nil, fmt.Errorf("%s: acquire %q: %w", Backend, key, lockswap.ErrHeld)
	}
	return lk.held(key, token, myKey, slot, resp.Header.Revision, ls, start, ttl)
}

// Acquire joins the lock's queue and waits, woken by a watch, until it is
// first. The wait ends early when ctx ends (the queue key is then removed)
// or when etcd cannot be reached and the retry policy gives up.
func (lk *Locker) Acquire(ctx context.Context, key string, opts ...lockswap.Option) (lockswap.Lock, error) {
	o, err := lk.prepare(key, opts)
	if err != nil {
		return nil, err
	}
	return lockswap.Retry(ctx, o.Retry, func(ctx context.Context) (lockswap.Lock, error) {
		return lk.queue(ctx, key, o.TTL)
	})
}

// queueOpts read the newest two keys of the queue up to a create revision:
// our own key and the one just before it.
func queueOpts(maxRev int64) []clientv3.OpOption {
	o := []clientv3.OpOption{clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2)}
	if maxRev > 0 {
		o = append(o, clientv3.WithMaxCreateRev(maxRev))
	}
	return o
}

func (lk *Locker) queue(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	ls, err := lk.lease(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	pfx := lk.QueuePrefix(key)
	token := lockstate.NewToken()
	// The slot's key name is ours alone (see contenderKey), so the put
	// needs no compare.
	slot := lk.takeSlot()
	myKey := lk.contenderKey(pfx, slot)
	start := time.Now()
	rctx, cancel := lk.reqCtx(ctx)
	resp, err := lk.c.Txn(rctx).
		Then(clientv3.OpPut(myKey, token, clientv3.WithLease(ls.id)), clientv3.OpGet(pfx, queueOpts(0)...)).
		Commit()
	cancel()
	if err != nil {
		lk.removeKey(ctx, myKey, slot)
		if ctx.Err() != nil {
			return nil, lockswap.WaitError(lk.fail("acquire", key, err), ctx.Err())
		}
		return nil, lk.fail("acquire", key, err)
	}
	myRev := resp.Header.Revision
	kvs := resp.Responses[1].GetResponseRange().Kvs
	header := resp.Header.Revision
	for {
		if len(kvs) == 0 || string(kvs[0].Key) != myKey {
			// Our key is gone: the lease expired while we waited.
			return nil, fmt.Errorf("%s: acquire %q: queue entry vanished while waiting (lease lost): %w", Backend, key, lockswap.ErrUnavailable)
		}
		if len(kvs) == 1 {
			return lk.held(key, token, myKey, slot, myRev, ls, start, ttl)
		}
		if err := lk.waitDelete(ctx, string(kvs[1].Key), kvs[1].CreateRevision, header); err != nil {
			lk.removeKey(ctx, myKey, slot)
			if ctx.Err() != nil {
				return nil, lockswap.WaitError(fmt.Errorf("%s: acquire %q: %w", Backend, key, lockswap.ErrHeld), ctx.Err())
			}
			return nil, lk.fail("acquire", key, err)
		}
		start = time.Now()
		rctx, cancel := lk.reqCtx(ctx)
		g, err := lk.c.Get(rctx, pfx, queueOpts(myRev)...)
		cancel()
		if err != nil {
			lk.removeKey(ctx, myKey, slot)
			if ctx.Err() != nil {
				return nil, lockswap.WaitError(fmt.Errorf("%s: acquire %q: %w", Backend, key, lockswap.ErrHeld), ctx.Err())
			}
			return nil, lk.fail("acquire", key, err)
		}
		kvs, header = g.Kvs, g.Header.Revision
	}
}

// waitDelete waits until k, created at revision created, is deleted after
// revision rev, at which the caller read it. (A later key of the same name
// is a later contender: its presence means ours is gone.)
//
// The watch starts at the server's current revision ("from now"): such a
// watch is synced and gets each event as soon as it is committed. A watch
// from rev+1 would do when nothing was written since rev, but under
// contention other writes have moved the revision on by the time the watch
// is registered, and a watch from a past revision waits for the server's
// unsynced-watcher loop (every 100 ms). A deletion between rev and the
// watch's creation is caught by reading k once the watch exists.
func (lk *Locker) waitDelete(ctx context.Context, k string, created, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	closing := lk.ctx.Done()
	for {
		wch := lk.c.Watch(wctx, k, clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
		for {
			var wr clientv3.WatchResponse
			var ok bool
			select {
			case wr, ok = <-wch:
			case <-closing:
				return fmt.Errorf("waiting for %q: %w", k, lockswap.ErrClosed)
			}
			if !ok {
				if err := ctx.Err(); err != nil {
					return err
				}
				break // the watch ended (member lost): watch again
			}
			if err := wr.Err(); err != nil {
				return nil // cancelled by the server: the caller re-reads the queue
			}
			if wr.Created {
				if wr.Header.Revision <= rev {
					continue
				}
				rctx, rcancel := lk.reqCtx(ctx)
				g, err := lk.c.Get(rctx, k)
				rcancel()
				if err != nil {
					return err
				}
				if len(g.Kvs) == 0 || g.Kvs[0].CreateRevision != created {
					return nil
				}
				rev = g.Header.Revision
				continue
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					return nil
				}
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// Re-read k before the next watch, as after any gap.
		rctx, rcancel := lk.reqCtx(ctx)
		g, err := lk.c.Get(rctx, k)
		rcancel()
		if err != nil {
			return err
		}
		if len(g.Kvs) == 0 || g.Kvs[0].CreateRevision != created {
			return nil
		}
		rev = g.Header.Revision
	}
}

// removeKey deletes our queue key after a failed or cancelled attempt; it
// runs even when ctx is cancelled. The slot is reused only when the delete
// is confirmed.
func (lk *Locker) removeKey(ctx context.Context, myKey string, slot int) {
	cctx, cancel := lockswap.CleanupContext(ctx)
	defer cancel()
	if _, err := lk.c.Delete(cctx, myKey); err == nil {
		lk.putSlot(slot)
	}
}

// contenderKey is the key of contender slot in the queue pfx: the Locker's
// random id (64 bits) and a slot number. A slot goes back to the free list
// only once this Locker has seen its key deleted by its own request, after
// which no handle that used it sends another plain delete; until then the
// name belongs to one attempt or lock alone. That makes the put of Acquire
// and the delete of Release safe without a compare. Reusing slots keeps a
// busy lock from leaving an ever-growing set of deleted keys in etcd's index
// (which every prefix read walks until the next compaction); the create
// revision, not the name, tells holders apart (Fence, IsOwner).
func (lk *Locker) contenderKey(pfx string, slot int) string {
	return pfx + lk.id + "-" + strconv.Itoa(slot)
}

func (lk *Locker) takeSlot() int {
	lk.slotMu.Lock()
	defer lk.slotMu.Unlock()
	if n := len(lk.freeSlots); n > 0 {
		s := lk.freeSlots[n-1]
		lk.freeSlots = lk.freeSlots[:n-1]
		return s
	}
	lk.nextSlot++
	return lk.nextSlot
}

func (lk *Locker) putSlot(s int) {
	lk.slotMu.Lock()
	lk.freeSlots = append(lk.freeSlots, s)
	lk.slotMu.Unlock()
}

// held makes the lock handle and starts watching its key.
func (lk *Locker) held(key, token, myKey string, slot int, rev int64, ls *lease, start time.Time, ttl time.Duration) (*Lock, error) {
	l := &Lock{lk: lk, ls: ls, etcdKey: myKey, slot: slot, rev: rev,
		State: lockstate.New(key, token, uint64(rev), true, start.Add(ttl-lockstate.Drift(ttl)))}
	lk.mu.Lock()
	if lk.closed {
		lk.mu.Unlock()
		l.settle(stateLost)
		l.End()
		lk.removeKey(context.Background(), myKey, slot) // the put is ours: leave nothing behind
		return nil, fmt.Errorf("%s: acquire %q: %w", Backend, key, lockswap.ErrClosed)
	}
	if !ls.add(l) {
		lk.mu.Unlock()
		l.settle(stateLost)
		l.End()
		lk.removeKey(context.Background(), myKey, slot)
		return nil, fmt.Errorf("%s: acquire %q: lease lost while acquiring: %w", Backend, key, lockswap.ErrUnavailable)
	}
	lk.locks[l] = struct{}{}
	lk.wg.Add(1)
	l.watchTimer = time.AfterFunc(WatchDelay, l.watch)
	lk.mu.Unlock()
	return l, nil
}

// forget drops l from the Locker's and the lease's books; it runs once per
// lock, when its watch ends or is cancelled before it started.
func (lk *Locker) forget(l *Lock) {
	lk.mu.Lock()
	delete(lk.locks, l)
	lk.mu.Unlock()
	l.ls.remove(l)
	lk.wg.Done()
}

// WatchDelay is how long a held lock waits before it watches its key. A
// lock released sooner costs no watch at all; a deletion by someone else in
// the meantime is still seen, since the watch starts at the revision after
// the acquisition.
const WatchDelay = 20 * time.Millisecond

package etcdlease

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/internal/testserver"
)

// TestReadWriteConformance: etcdlease's read-write locks pass the
// read-write suite (which runs the whole mutex suite on write holds too).
func TestReadWriteConformance(t *testing.T) {
	srv := testserver.EtcdT(t)
	conformance.RunReadWrite(t, conformance.Harness{
		NewLocker:  func(t *testing.T) lockswap.Locker { return openT(t, srv.Endpoints(), "rw/") },
		TTL:        time.Second,
		Expire:     expire,
		Goroutines: []string{"go.etcd.io/etcd/client/v3"},
	})
}

// TestRWKeys: a read or write hold is a queue key whose value names the
// kind and carries the token, its fence is the key's create revision, and
// a release deletes it.
func TestRWKeys(t *testing.T) {
	srv := testserver.EtcdT(t)
	lk := openT(t, srv.Endpoints(), "rwk/")
	cli := lk.Client()
	ctx := context.Background()
	for _, c := range []struct {
		opt    lockswap.Option
		prefix string
	}{{lockswap.WithRead(), ReadValuePrefix}, {lockswap.WithWrite(), WriteValuePrefix}} {
		l, err := lk.TryAcquire(ctx, "doc", c.opt, lockswap.WithTTL(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		key, _ := EtcdKey(l)
		g, err := cli.Get(ctx, key)
		if err != nil || len(g.Kvs) != 1 {
			t.Fatalf("the hold's key %s: %v, %v", key, g, err)
		}
		if !strings.HasPrefix(key, lk.QueuePrefix("doc")) || string(g.Kvs[0].Value) != c.prefix+l.Token() {
			t.Errorf("key %s = %q, want under the queue prefix with value %q", key, g.Kvs[0].Value, c.prefix+l.Token())
		}
		if f, ok := l.Fence(); !ok || f != uint64(g.Kvs[0].CreateRevision) {
			t.Errorf("Fence() = %d, %v; want the key's create revision %d", f, ok, g.Kvs[0].CreateRevision)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if g, err := cli.Get(ctx, lk.QueuePrefix("doc"), clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || g.Count != 0 {
			t.Errorf("after Release: %d keys, %v; want none", g.Count, err)
		}
	}
}

// TestRWReaderBehindWaitingWriter: the queue is FIFO: a reader that comes
// after a waiting writer waits behind it even while readers hold, gets in
// once the writer has had its turn, and a refused TryAcquire leaves no key.
func TestRWReaderBehindWaitingWriter(t *testing.T) {
	srv := testserver.EtcdT(t)
	a, b, c := openT(t, srv.Endpoints(), "fifo/"), openT(t, srv.Endpoints(), "fifo/"), openT(t, srv.Endpoints(), "fifo/")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r1, err := a.TryAcquire(ctx, "k", lockswap.WithRead())
	if err != nil {
		t.Fatal(err)
	}
	count := func() int64 {
		g, err := a.Client().Get(ctx, a.QueuePrefix("k"), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return g.Count
	}
	type result struct {
		l   lockswap.Lock
		err error
	}
	wrote, read := make(chan result, 1), make(chan result, 1)
	go func() {
		l, err := b.Acquire(ctx, "k", lockswap.WithWrite())
		wrote <- result{l, err}
	}()
	for count() != 2 { // the writer's key is in the queue (bounded by ctx)
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := c.TryAcquire(ctx, "k", lockswap.WithRead()); !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("a reader's TryAcquire behind the waiting writer: err = %v, want ErrHeld", err)
	}
	if n := count(); n != 2 {
		t.Errorf("the refused TryAcquire left its key: %d keys, want 2", n)
	}
	go func() {
		l, err := c.Acquire(ctx, "k", lockswap.WithRead())
		read <- result{l, err}
	}()
	for count() != 3 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := r1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w := <-wrote
	if w.err != nil {
		t.Fatalf("the writer after the first reader released: %v", w.err)
	}
	select {
	case r := <-read:
		t.Fatalf("the second reader got in while the writer held: %v, %v", r.l, r.err)
	default:
	}
	if err := w.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-read
	if r.err != nil {
		t.Fatalf("the second reader after the writer released: %v", r.err)
	}
	wf, _ := w.l.Fence()
	if rf, _ := r.l.Fence(); rf <= wf {
		t.Errorf("the reader after the writer got fence %d, the writer %d: conflicting holds' fences rise", rf, wf)
	}
	r.l.Release(ctx)
}

// TestRWMixRefused: a read or write hold of a key whose mutex or permit is
// held, and a mutex or permit of a key with a read hold, are refused with
// ErrInvalid naming the kinds, by TryAcquire and Acquire, and leave no key.
func TestRWMixRefused(t *testing.T) {
	srv := testserver.EtcdT(t)
	lk := openT(t, srv.Endpoints(), "rwmix/")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	count := func() int64 {
		g, err := lk.Client().Get(ctx, "rwmix/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return g.Count
	}
	m, err := lk.TryAcquire(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	p, err := lk.TryAcquire(ctx, "p", lockswap.WithPermits(2))
	if err != nil {
		t.Fatal(err)
	}
	r, err := lk.TryAcquire(ctx, "r", lockswap.WithRead())
	if err != nil {
		t.Fatal(err)
	}
	before := count()
	for _, c := range []struct {
		key, want string
		opts      []lockswap.Option
	}{
		{"m", "a mutex's", []lockswap.Option{lockswap.WithRead()}},
		{"m", "a mutex's", []lockswap.Option{lockswap.WithWrite()}},
		{"p", "counting semaphore", []lockswap.Option{lockswap.WithRead()}},
		{"r", "read-write lock", nil},
		{"r", "read-write lock", []lockswap.Option{lockswap.WithPermits(2)}},
	} {
		for _, try := range []bool{true, false} {
			call := lk.Acquire
			if try {
				call = lk.TryAcquire
			}
			_, err := call(ctx, c.key, c.opts...)
			if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s with %d options (try %v): err = %v, want ErrInvalid naming %q", c.key, len(c.opts), try, err, c.want)
			}
		}
	}
	if n := count(); n != before {
		t.Errorf("the refused calls left %d keys, want the %d of the holders", n, before)
	}
	for _, l := range []lockswap.Lock{m, p, r} {
		l.Release(ctx)
	}
}

// TestRWBehindConcurrencyMutex: etcd's concurrency.Mutex on the same queue
// prefix is a mutex to a read hold: refused with ErrInvalid.
func TestRWBehindConcurrencyMutex(t *testing.T) {
	srv := testserver.EtcdT(t)
	lk := openT(t, srv.Endpoints(), "rwcm/")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sess, err := concurrency.NewSession(lk.Client())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	m := concurrency.NewMutex(sess, lk.QueuePrefix("k"))
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Unlock(ctx)
	for i, opt := range []lockswap.Option{lockswap.WithRead(), lockswap.WithWrite()} {
		if _, err := lk.Acquire(ctx, "k", opt); !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("hold %d (read, write) behind the Mutex: err = %v, want ErrInvalid", i, err)
		}
	}
}

// TestRWTryWriteWritesNothing: a writer's TryAcquire on a key held by a
// reader writes nothing (the store's revision stays), so it never keeps
// readers out, even for a moment.
func TestRWTryWriteWritesNothing(t *testing.T) {
	srv := testserver.EtcdT(t)
	lk := openT(t, srv.Endpoints(), "tw/")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := lk.TryAcquire(ctx, "k", lockswap.WithRead())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release(ctx)
	rev := func() int64 {
		g, err := lk.Client().Get(ctx, "tw/none")
		if err != nil {
			t.Fatal(err)
		}
		return g.Header.Revision
	}
	before := rev()
	if _, err := lk.TryAcquire(ctx, "k", lockswap.WithWrite()); !errors.Is(err, lockswap.ErrHeld) {
		t.Fatalf("a writer's TryAcquire beside a reader: err = %v, want ErrHeld", err)
	}
	if after := rev(); after != before {
		t.Errorf("the refused writer's TryAcquire moved the revision from %d to %d: it wrote", before, after)
	}
}

// TestHugeRWKeyRefused: a read or write hold whose queue prefix is above
// MaxPermitPrefixBytes is refused with ErrInvalid before anything is
// sent (a reader's read of the queue returns every key before its own),
// and a mutex's TryAcquire on such a key therefore needs no look for them.
func TestHugeRWKeyRefused(t *testing.T) {
	srv := testserver.EtcdT(t)
	lk := openT(t, srv.Endpoints(), "hrw/")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	key := strings.Repeat("k", MaxPermitPrefixBytes)
	for _, opt := range []lockswap.Option{lockswap.WithRead(), lockswap.WithWrite()} {
		if _, err := lk.TryAcquire(ctx, key, opt); !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "MaxPermitPrefixBytes") {
			t.Errorf("a hold of a key above MaxPermitPrefixBytes: err = %v, want ErrInvalid naming the limit", err)
		}
	}
	m, err := lk.TryAcquire(ctx, key)
	if err != nil {
		t.Fatalf("the mutex of the long key: %v", err)
	}
	m.Release(ctx)
}

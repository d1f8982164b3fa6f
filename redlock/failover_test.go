package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/backend"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redlock"
)

// refusing is the error reply of a master that refuses every command
// (miniredis SetError): a transient one, so the grant's outcome is unknown
// and nothing was written.
const refusing = "LOADING Redis is loading the dataset in memory"

// failoverSetup starts five masters and a holder's Locker with opts over
// them; the masters in refuse answer every command with an error while
// the holder acquires "k" (so it gets exactly the others' grants), and
// answer again afterwards. It returns the masters, the holder's Locker and
// the acquire's result.
func failoverSetup(t *testing.T, opts redlock.Options, refuse ...int) ([]*miniredis.Miniredis, *redlock.Locker, lockswap.Lock, error) {
	t.Helper()
	ms := make([]*miniredis.Miniredis, 5)
	addrs := make([]string, len(ms))
	for i := range ms {
		ms[i] = miniredis.RunT(t)
		addrs[i] = ms[i].Addr()
	}
	a := newLocker(t, addrs, redistest.GoRedis, opts)
	for _, i := range refuse {
		ms[i].SetError(refusing)
	}
	l, err := a.TryAcquire(ctxT(t), "k", lockswap.WithTTL(30*time.Second))
	for _, i := range refuse {
		ms[i].SetError("")
	}
	return ms, a, l, err
}

// failOver replaces master 0 by a promoted replica that never received the
// lock (an empty server: asynchronous replication lost the SET), and
// returns the masters' addresses after the failover, which the clients
// move to.
func failOver(t *testing.T, ms []*miniredis.Miniredis) []string {
	t.Helper()
	ms[0].Close()
	addrs := []string{miniredis.RunT(t).Addr()}
	for _, m := range ms[1:] {
		addrs = append(addrs, m.Addr())
	}
	return addrs
}

// TestFailoverBareMajorityLosesLock shows the weakness plain Redlock
// declares (SurvivesFailover false): masters 4 and 5 refuse the holder's
// grants, so it holds a bare majority, 3 of 5; master 1, one of its three,
// fails over to a replica that never received the lock; a second client
// then gets 3 grants (the promoted replica, masters 4 and 5) while the
// first lock is valid.
func TestFailoverBareMajorityLosesLock(t *testing.T) {
	ctx := ctxT(t)
	ms, _, la, err := failoverSetup(t, redlock.Options{}, 3, 4)
	if err != nil {
		t.Fatalf("the holder's acquire with 3 of 5 masters answering: %v", err)
	}
	if n, ok := redlock.Grants(la); !ok || n != 3 {
		t.Fatalf("Grants = %d, %v; want 3 (masters 4 and 5 refused)", n, ok)
	}
	if g := redlock.GuaranteesOf(5, redlock.Options{}); g.SurvivesFailover {
		t.Fatalf("the default declares SurvivesFailover; this test shows it does not: %+v", g)
	}
	b := newLocker(t, failOver(t, ms), redistest.GoRedis, redlock.Options{})
	lb, err := b.TryAcquire(ctx, "k", lockswap.WithTTL(30*time.Second))
	if err != nil {
		t.Fatalf("the second client was refused (%v): the weakness the default declares did not show", err)
	}
	if !time.Now().Before(la.Deadline()) {
		t.Fatalf("the first lock's validity ended before the second client acquired: nothing shown")
	}
	if n, _ := redlock.Grants(lb); n != 3 {
		t.Errorf("second lock: Grants = %d, want 3 (the promoted replica, masters 4 and 5)", n)
	}
	t.Logf("as declared: two holders at once, the first with %v of validity left", time.Until(la.Deadline()).Round(time.Millisecond))
}

// TestFailoversOneKeepsExclusion: with Failovers 1 a bare majority is no
// lock, and a lock needs 4 of 5 grants; the same sequence (master 5
// refuses, master 1, a granting one, fails over to a replica without the
// lock) leaves 3 masters holding it, and no second client gets in, with
// Failovers 1 or without.
func TestFailoversOneKeepsExclusion(t *testing.T) {
	ctx := ctxT(t)
	opts := redlock.Options{Failovers: 1}
	ms, a, l, err := failoverSetup(t, opts, 3, 4)
	if !errors.Is(err, lockswap.ErrUnavailable) {
		t.Fatalf("acquire with Failovers=1 and 3 of 5 masters answering: %v, %v; want ErrUnavailable (4 grants needed)", l, err)
	}
	for i, m := range ms {
		if m.Exists("k") {
			t.Errorf("master %d kept the key of the failed attempt: it was not undone", i+1)
		}
	}
	if a.Quorum() != 4 {
		t.Errorf("Quorum() = %d with Failovers 1 over 5, want 4", a.Quorum())
	}
	ms, _, la, err := failoverSetup(t, opts, 4)
	if err != nil {
		t.Fatalf("acquire with Failovers=1 and 4 of 5 masters answering: %v", err)
	}
	if n, ok := redlock.Grants(la); !ok || n != 4 {
		t.Fatalf("Grants = %d, %v; want 4", n, ok)
	}
	after := failOver(t, ms)
	for _, bo := range []redlock.Options{opts, {}} {
		b := newLocker(t, after, redistest.GoRedis, bo)
		if lb, err := b.TryAcquire(ctx, "k", lockswap.WithTTL(30*time.Second)); !errors.Is(err, lockswap.ErrHeld) {
			t.Fatalf("a second client with Failovers=%d after the failover: %v, %v; want ErrHeld (3 of 5 still hold the first lock)", bo.Failovers, lb, err)
		}
	}
	if !time.Now().Before(la.Deadline()) {
		t.Fatalf("the first lock's validity ended before the second clients tried: nothing shown")
	}
}

// TestFailoversDeclared: Guarantees declares surviving a failover only
// with Failovers, whose cost is in Tolerates; New and the URL refuse a
// Failovers no N/2+1+f grants can meet, and require=failover opens only
// the configuration that declares it.
func TestFailoversDeclared(t *testing.T) {
	for _, tc := range []struct {
		n, f, tolerates int
		survives        bool
	}{{3, 0, 1, false}, {3, 1, 0, true}, {5, 0, 2, false}, {5, 1, 1, true}, {5, 2, 0, true}, {7, 1, 2, true}} {
		g := redlock.GuaranteesOf(tc.n, redlock.Options{Failovers: tc.f})
		if g.SurvivesFailover != tc.survives || g.Tolerates != tc.tolerates {
			t.Errorf("GuaranteesOf(%d, Failovers %d): survives failover %v, tolerates %d; want %v, %d", tc.n, tc.f, g.SurvivesFailover, g.Tolerates, tc.survives, tc.tolerates)
		}
	}
	addrs, _ := miniredisN(t, 3)
	for _, f := range []int{-1, 2} {
		cs := make([]redisclient.Client, len(addrs))
		for i, a := range addrs {
			cs[i] = redistest.GoRedis(t, a)
		}
		if lk, err := redlock.New(cs, redlock.Options{Failovers: f}); !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "Failovers") {
			t.Errorf("New with Failovers %d over 3: %v, %v; want ErrInvalid naming Failovers", f, lk, err)
		}
	}
	hosts := "redlock://" + strings.Join(addrs, ",")
	for _, q := range []string{"failovers=2", "failovers=-1", "failovers=one"} {
		if _, err := backend.ParseURL(hosts + "?" + q); !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "failovers") {
			t.Errorf("%s: %v, want ErrInvalid naming failovers", q, err)
		}
	}
	ctx := context.Background()
	if lk, err := backend.OpenURL(ctx, hosts+"?require=failover"); !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "failover") {
		if lk != nil {
			lk.Close()
		}
		t.Errorf("require=failover without failovers: %v, want ErrInvalid naming failover", err)
	}
	lk, err := backend.OpenURL(ctx, hosts+"?failovers=1&require=failover")
	if err != nil {
		t.Fatalf("failovers=1&require=failover: %v", err)
	}
	defer lk.Close()
	if g := lk.Guarantees(); !g.SurvivesFailover || g.Tolerates != 0 {
		t.Errorf("failovers=1 over 3: %+v; want survives failover, tolerates 0", g)
	}
}

// TestFailoversReleaseAfterOneFailover: with Failovers=1, one of the four
// masters that granted the lock forgets it (the failover the margin is
// for): the lock was still ours, and Release says so (nil), not ErrLost.
func TestFailoversReleaseAfterOneFailover(t *testing.T) {
	ctx := ctxT(t)
	ms, _, la, err := failoverSetup(t, redlock.Options{Failovers: 1}, 4)
	if err != nil {
		t.Fatal(err)
	}
	ms[0].FlushAll()
	if err := la.Release(ctx); err != nil {
		t.Errorf("Release after 1 of the lock's 4 masters forgot it, with Failovers=1: %v, want nil", err)
	}
}

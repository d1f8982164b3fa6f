package redlock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/fenced"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/servers"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redlock"
)

// The environment of the helper process (TestFenceHelperProcess): the test
// binary run again as a second client process.
const (
	envChild = "LOCKSWAP_REDLOCK_FENCE_CHILD" // the helper's job: "hold" or "churn"
	envAddrs = "LOCKSWAP_REDLOCK_FENCE_ADDRS" // the masters, comma-separated
	envKey   = "LOCKSWAP_REDLOCK_FENCE_KEY"
	envN     = "LOCKSWAP_REDLOCK_FENCE_N" // churn: acquisitions per goroutine
)

// TestFenceHelperProcess is not a test: it is the second process of the
// fence tests, and returns at once unless envChild is set. Its output lines
// that start with "fence " are its reports.
//
//   - hold: acquires the key (TTL 500 ms, not extended), reports
//     "fence F", and when a line comes on stdin, reports "write F", the
//     write it makes as the holder it believes it still is.
//   - churn: 3 goroutines acquire the key (TTL 40 and 120 ms) N times each,
//     releasing most locks and letting the others expire, and report every
//     acquisition as "fence acq START END F" (wall clock, ns).
func TestFenceHelperProcess(t *testing.T) {
	job := os.Getenv(envChild)
	if job == "" {
		return
	}
	addrs := strings.Split(os.Getenv(envAddrs), ",")
	key := os.Getenv(envKey)
	lk := newLocker(t, addrs, redistest.GoRedis, redlock.Options{Fence: true, InstanceTimeout: 20 * time.Millisecond,
		Retry: lockswap.JitterRetry(time.Millisecond, 5*time.Millisecond)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "fence "+format+"\n", args...)
		out.Flush()
	}
	switch job {
	case "hold":
		l, err := lk.Acquire(ctx, key, lockswap.WithTTL(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		f := fenceOf(t, l)
		report("%d", f)
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		report("write %d", f)
	case "churn":
		n, _ := strconv.Atoi(os.Getenv(envN))
		var wg sync.WaitGroup
		for g := range 3 {
			wg.Go(func() {
				for _, a := range churn(ctx, lk, key, n, fmt.Sprintf("child-%d", g), nil) {
					report("acq %d %d %d", a.start, a.end, a.fence)
				}
			})
		}
		wg.Wait()
	}
}

// helper starts the test binary as the helper process for job, with its
// stdin and stdout piped; it is killed at the end of the test.
func helper(t *testing.T, job string, addrs []string, key string, n int) (*exec.Cmd, io.WriteCloser, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFenceHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envChild+"="+job, envAddrs+"="+strings.Join(addrs, ","), envKey+"="+key, envN+"="+strconv.Itoa(n))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		servers.ContinueProcess(cmd.Process)
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("helper process stderr:\n%s", stderr.String())
		}
	})
	return cmd, stdin, bufio.NewScanner(stdout)
}

// nextReport returns the helper's next report line (without "fence "),
// failing the test when it ends without one.
func nextReport(t *testing.T, sc *bufio.Scanner) (string, bool) {
	t.Helper()
	for sc.Scan() {
		if r, ok := strings.CutPrefix(sc.Text(), "fence "); ok {
			return r, true
		}
	}
	return "", false
}

// TestFenceHolderPaused: on 3 and 5 masters, a holder in another process
// is SIGSTOPped past its validity; this process acquires the key (with a
// larger fence) and writes to a fenced resource; the holder is resumed and
// writes as the holder it believes it still is: the resource rejects its
// stale fence.
func TestFenceHolderPaused(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			addrs, _ := realN(t, n)
			cmd, stdin, sc := helper(t, "hold", addrs, "paused", 0)
			r, ok := nextReport(t, sc)
			if !ok {
				t.Fatal("the holder reported no fence")
			}
			stale, err := strconv.ParseUint(r, 10, 64)
			if err != nil {
				t.Fatalf("holder report %q: %v", r, err)
			}
			if err := servers.StopProcess(cmd.Process); err != nil {
				t.Fatal(err)
			}
			if !servers.WaitStopped(cmd.Process.Pid) {
				t.Fatal("the holder was not seen stopped")
			}
			var res fenced.Resource
			if err := res.Write("holder", stale); err != nil { // its write before the pause
				t.Fatal(err)
			}
			lk := newLocker(t, addrs, redistest.Redigo, redlock.Options{Fence: true})
			// Granted once the paused holder's lock has expired.
			l, err := lk.Acquire(ctxT(t), "paused", lockswap.WithTTL(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(context.Background())
			f := fenceOf(t, l)
			if f <= stale {
				t.Fatalf("the new holder's fence %d is not above the paused holder's %d", f, stale)
			}
			if err := res.Write("new holder", f); err != nil {
				t.Fatal(err)
			}
			if err := servers.ContinueProcess(cmd.Process); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(stdin, "go")
			r, ok = nextReport(t, sc)
			if !ok || r != "write "+strconv.FormatUint(stale, 10) {
				t.Fatalf("resumed holder reported %q, %v; want its write with fence %d", r, ok, stale)
			}
			if err := res.Write("resumed holder", stale); !errors.Is(err, fenced.ErrStale) {
				t.Fatalf("the resumed holder's write with fence %d: %v; want it rejected as stale (newest %d)", stale, err, f)
			}
			if st := res.Stats(); st.Rejected != 1 || st.HighestFence != f || st.LastWriter != "new holder" {
				t.Fatalf("resource stats %+v: want the stale write rejected and the new holder's kept", st)
			}
		})
	}
}

// writeLog is a fenced.Resource that also records the order of the writes
// it accepts, per acquisition: a holder whose write is accepted after
// another holder's was is an interleaving, what a fenced resource exists to
// prevent (and lets through when two holders carry the same fence).
type writeLog struct {
	mu          sync.Mutex
	res         fenced.Resource
	last        string          // the acquisition of the last accepted write
	overtaken   map[string]bool // acquisitions another's accepted write followed
	interleaved []string
	lateWrites  int // writes made after a later holder wrote
	lateStale   int // of those, rejected as stale
}

var acquisitionIDs atomic.Int64

// write writes for acquisition id with fence and reports whether the
// resource accepted it.
func (w *writeLog) write(id string, fence uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.res.Write(id, fence); err != nil {
		return false
	}
	if w.last != id {
		if w.overtaken[id] {
			w.interleaved = append(w.interleaved, fmt.Sprintf("%s (fence %d) after %s", id, fence, w.last))
		}
		if w.last != "" {
			w.overtaken[w.last] = true
		}
		w.last = id
	}
	return true
}

// writeLate waits (bounded) until another holder's write is accepted after
// id's, then writes for id again, as a holder paused past its validity
// would, and counts whether the resource rejected it.
func (w *writeLog) writeLate(ctx context.Context, id string, fence uint64) {
	until := time.Now().Add(time.Second)
	for {
		w.mu.Lock()
		overtaken := w.overtaken[id]
		w.mu.Unlock()
		if overtaken {
			break
		}
		if time.Now().After(until) || ctx.Err() != nil {
			return // nobody wrote after id meanwhile: nothing to show
		}
		time.Sleep(2 * time.Millisecond)
	}
	accepted := w.write(id, fence)
	w.mu.Lock()
	w.lateWrites++
	if !accepted {
		w.lateStale++
	}
	w.mu.Unlock()
}

// churn acquires key n times, with a TTL of 40 ms (which a loaded machine
// running -race can spend in one acquisition) and 120 ms in turn,
// releasing four locks in five and letting the fifth expire, and returns
// the acquisitions. With a writeLog, each holder writes its fence when
// granted and again before releasing; the holder of the fifth lock writes
// again only after a later holder has written (writeLate).
func churn(ctx context.Context, lk lockswap.Locker, key string, n int, who string, log *writeLog) []acquisition {
	var out []acquisition
	for i := 0; i < n && ctx.Err() == nil; i++ {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		start := time.Now().UnixNano()
		ttl := 40 * time.Millisecond
		if i%2 == 1 {
			ttl = 120 * time.Millisecond
		}
		l, err := lk.Acquire(actx, key, lockswap.WithTTL(ttl))
		end := time.Now().UnixNano()
		cancel()
		if err != nil {
			continue // a deadline under faults: no grant, nothing to check
		}
		f, _ := l.Fence()
		out = append(out, acquisition{start, end, f, who})
		id := fmt.Sprintf("%s#%d", who, acquisitionIDs.Add(1))
		if log != nil {
			log.write(id, f)
		}
		if i%5 != 4 {
			if log != nil {
				log.write(id, f)
			}
			l.Release(ctx)
		} else if log != nil {
			log.writeLate(ctx, id, f)
		}
	}
	return out
}

// TestFenceChurnTwoProcesses: this process and a second one (3 goroutines
// each) acquire one key on 3 masters with a TTL of 40 ms, so that locks
// expire in the middle of acquisitions: no fence repeats, and an
// acquisition that started after another returned has a larger fence.
func TestFenceChurnTwoProcesses(t *testing.T) {
	addrs, _ := realN(t, 3)
	const perGoroutine = 60
	_, _, sc := helper(t, "churn", addrs, "churn2", perGoroutine)
	lk := newLocker(t, addrs, redistest.Rueidis, redlock.Options{Fence: true, InstanceTimeout: 20 * time.Millisecond,
		Retry: lockswap.JitterRetry(time.Millisecond, 5*time.Millisecond)})
	ctx := ctxT(t)
	var mu sync.Mutex
	var acqs []acquisition
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			a := churn(ctx, lk, "churn2", perGoroutine, fmt.Sprintf("parent-%d", g), nil)
			mu.Lock()
			acqs = append(acqs, a...)
			mu.Unlock()
		})
	}
	var child int
	for {
		r, ok := nextReport(t, sc)
		if !ok {
			break
		}
		var a acquisition
		if _, err := fmt.Sscanf(r, "acq %d %d %d", &a.start, &a.end, &a.fence); err != nil {
			t.Fatalf("helper report %q: %v", r, err)
		}
		a.who = "child"
		child++
		mu.Lock()
		acqs = append(acqs, a)
		mu.Unlock()
	}
	wg.Wait()
	t.Logf("%d acquisitions, %d by the second process", len(acqs), child)
	if child == 0 || len(acqs) == child {
		t.Fatalf("%d acquisitions, %d by the second process: want both processes to acquire", len(acqs), child)
	}
	if err := fenceViolation(acqs); err != nil {
		t.Fatal(err)
	}
}

// TestFenceChurnFaults: over 5 masters with RestartSafety, 8 keys, 3
// Lockers per key (go-redis, redigo, rueidis) acquire with a TTL of 40 ms
// while instances are killed and restarted empty (their counters lost) and
// paused: over at least 1000 acquisitions, no fence repeats for a key and an
// acquisition that started after another returned has a larger fence. Each
// key has a fenced.Resource that every holder writes to: no holder's write
// is accepted after another holder's (no interleaving), and every write a
// holder makes after its lock expired and a later holder wrote is
// rejected as stale.
func TestFenceChurnFaults(t *testing.T) {
	addrs, srvs := realN(t, 5)
	seedOldEpoch(t, rawClients(t, addrs))
	const keys, want = 8, 1000
	// A bound, not a wait: the test ends at 1000 acquisitions. Beside CPU
	// hogs under -race, with the rest of a CI run, it has made as few as
	// 479 in 90 s.
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	var total atomic.Int64
	stop := make(chan struct{})
	var faults []string
	var fw sync.WaitGroup
	// A fault every 25 acquisitions (the count, not the clock, paces them,
	// so that a slow machine sees as many).
	fw.Go(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for next := int64(25); ; next += 25 {
			for total.Load() < next {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
			s := srvs[rng.IntN(len(srvs))]
			switch rng.IntN(3) {
			case 0, 1:
				if err := s.Restart(); err != nil { // without persistence: empty
					t.Error(err)
					return
				}
				faults = append(faults, "restart "+s.Addr())
			case 2:
				if err := s.Pause(); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(60 * time.Millisecond) // the pause's length, not a wait for a condition
				s.Resume()
				faults = append(faults, "pause "+s.Addr())
			}
		}
	})
	var mu sync.Mutex
	acqs := make([][]acquisition, keys)
	logs := make([]*writeLog, keys)
	var wg sync.WaitGroup
	for k := range keys {
		logs[k] = &writeLog{overtaken: map[string]bool{}}
		for _, c := range redistest.Clients {
			lk := newLocker(t, addrs, c.New, redlock.Options{Fence: true, RestartSafety: true, MaxTTL: 200 * time.Millisecond,
				InstanceTimeout: 20 * time.Millisecond, Retry: lockswap.JitterRetry(time.Millisecond, 5*time.Millisecond)})
			key := fmt.Sprintf("churn-%d", k)
			wg.Go(func() {
				for total.Load() < want && ctx.Err() == nil {
					a := churn(ctx, lk, key, 10, c.Name, logs[k])
					total.Add(int64(len(a)))
					mu.Lock()
					acqs[k] = append(acqs[k], a...)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	close(stop)
	fw.Wait()
	restarts := 0
	for _, f := range faults {
		if strings.HasPrefix(f, "restart") {
			restarts++
		}
	}
	t.Logf("%d acquisitions over %d keys, %d faults (%d restarts)", total.Load(), keys, len(faults), restarts)
	if total.Load() < want || restarts == 0 {
		t.Fatalf("%d acquisitions and %d restarts before the test's deadline: want %d acquisitions across restarts", total.Load(), restarts, want)
	}
	for k, a := range acqs {
		if err := fenceViolation(a); err != nil {
			t.Fatalf("key %d: %v", k, err)
		}
	}
	late, stale, accepted := 0, 0, 0
	for k, w := range logs {
		if len(w.interleaved) > 0 {
			t.Errorf("key %d: writes of two holders interleaved at the fenced resource: %v", k, w.interleaved)
		}
		late += w.lateWrites
		stale += w.lateStale
		accepted += w.res.Stats().Accepted
	}
	t.Logf("fenced resources: %d writes accepted; %d late writes (after the lock expired and a later holder wrote), %d rejected as stale", accepted, late, stale)
	if late == 0 || stale != late {
		t.Fatalf("%d of %d late writes rejected as stale: want all of them, and some", stale, late)
	}
}

// TestFenceRestartEmpty: with RestartSafety, instances killed and
// restarted without persistence (one at a time, then all at once) lose
// their counters between acquisitions; fences keep growing, since a lost
// counter is seeded again from the server's clock.
func TestFenceRestartEmpty(t *testing.T) {
	addrs, srvs := realN(t, 3)
	raws := rawClients(t, addrs)
	seedOldEpoch(t, raws)
	lk := newLocker(t, addrs, redistest.Redigo, redlock.Options{Fence: true, RestartSafety: true, MaxTTL: 500 * time.Millisecond})
	ctx := ctxT(t)
	var last uint64
	for round := range 8 {
		l, err := lk.Acquire(ctx, "restart", lockswap.WithTTL(500*time.Millisecond))
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		f := fenceOf(t, l)
		if f <= last {
			t.Fatalf("round %d: fence %d after %d: a counter lost in a restart gave a smaller fence", round, f, last)
		}
		last = f
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		restart := srvs[round%3 : round%3+1]
		if round%4 == 3 {
			restart = srvs
		}
		for _, s := range restart {
			if err := s.Restart(); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range restart {
			if n, err := redistest.GoRedisClient(t, s.Addr()).DBSize(ctx).Result(); err != nil || n != 0 {
				t.Fatalf("restarted instance has %d keys, %v: want it empty", n, err)
			}
		}
	}
}

// writeBackStall wraps a client and leaves the fence write-back unanswered
// while stall is set, as an instance that stops answering between the two
// rounds of a fenced acquisition does. It hides the wrapped client's
// Splitter: requests go through Run.
type writeBackStall struct {
	redisclient.Client
	stall atomic.Bool
}

func (c *writeBackStall) Run(ctx context.Context, s *redisclient.Script, keys []string, args ...any) (any, error) {
	if c.stall.Load() && len(keys) == 1 && strings.HasSuffix(keys[0], redlock.FenceSuffix) {
		<-ctx.Done() // every request context of the Locker ends by itself
		return nil, ctx.Err()
	}
	return c.Client.Run(ctx, s, keys, args...)
}

// TestFenceWriteBackDeadline: a fenced TryAcquire whose write-back finds
// the instances hung returns within lockswap.DeadlineGrace of its caller's
// deadline, fails, and its keys are removed (the attempt is undone).
func TestFenceWriteBackDeadline(t *testing.T) {
	const slack = 250 * time.Millisecond // scheduling on a loaded machine running -race
	for _, cl := range redistest.Clients {
		t.Run(cl.Name, func(t *testing.T) {
			addrs, _ := realN(t, 3)
			raws := rawClients(t, addrs)
			cs := make([]redisclient.Client, len(addrs))
			ws := make([]*writeBackStall, len(addrs))
			for i, a := range addrs {
				ws[i] = &writeBackStall{Client: cl.New(t, a)}
				cs[i] = ws[i]
			}
			// A 1 s instance timeout: only the caller's deadline can bound
			// the write-back below that.
			lk, err := redlock.New(cs, redlock.Options{Fence: true, InstanceTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lk.Close() })
			warm, err := lk.TryAcquire(ctxT(t), "warm-up", lockswap.WithTTL(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			warm.Release(ctxT(t))
			// A guess from a clock a minute behind does not apply: the
			// new key "k" takes the write-back round.
			redlock.SetGuessClock(lk, func() time.Time { return time.Now().Add(-time.Minute) })
			for _, w := range ws {
				w.stall.Store(true)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			deadline, _ := ctx.Deadline()
			_, err = lk.TryAcquire(ctx, "k", lockswap.WithTTL(10*time.Second))
			returned := time.Now()
			if err == nil {
				t.Fatal("TryAcquire succeeded with no write-back answered")
			}
			if over := returned.Sub(deadline); over > lockswap.DeadlineGrace+slack {
				t.Errorf("TryAcquire returned %v after its deadline, want at most DeadlineGrace (%v)", over.Round(time.Millisecond), lockswap.DeadlineGrace)
			}
			// The attempt is undone: the key goes from every instance
			// (bounded wait: part of the undo may run in the background).
			until := time.Now().Add(10 * time.Second)
			for {
				n := 0
				for _, rc := range raws {
					n += int(rc.Exists(context.Background(), "k").Val())
				}
				if n == 0 {
					break
				}
				if time.Now().After(until) {
					t.Fatalf("the failed attempt's key is still on %d instances", n)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestFaultsFenced: every call of a fenced Locker keeps its deadline when
// every master stops answering, is paused or answers late. The instance
// timeout is the default, adaptive, one: the harness's first TryAcquire,
// on fresh servers, dials and then sends each round's script twice
// (EVALSHA, NOSCRIPT, EVAL), which a loaded machine running -race did not
// always do in a fixed 100 ms, nor in 250 ms (issue 27); a new Locker
// gives it InitialInstanceTimeout, within the TTL's budget. The deadlines
// under test do not depend on it.
func TestFaultsFenced(t *testing.T) {
	redistest.RunMatrix(t, redistest.Backend{N: 3, TTL: time.Second,
		NewLocker: func(t *testing.T, clients []redisclient.Client) lockswap.Locker {
			lk, err := redlock.New(clients, redlock.Options{Fence: true})
			if err != nil {
				t.Fatal(err)
			}
			return lk
		},
		URL: func(hosts []string) string { return "redlock://" + strings.Join(hosts, ",") + "?fence=true" },
	})
}

// TestFenceOldSnapshotRepeats shows the declared weakness of the counters
// (Guarantees().Notes, docs/redlock.md "Persistence", A4 of
// docs/redlock-fencing.md): masters that crash and restart from an RDB
// snapshot taken before the last fences bring back older counters, which
// are not missing and so not re-seeded, and a Locker that has not seen the
// key (another process) and whose guess does not apply (its clock is behind
// the masters' by more than 5 ms: here a minute) is given a fence that was
// already issued. Both Lockers' clocks stand still a minute behind, so
// that the fences issued after the snapshot follow each other by one (each
// guess is the last fence plus one) and the repeat is forced. (Fences from
// guesses of a running clock jump ahead between acquisitions and make a
// repeat less likely, not impossible.)
func TestFenceOldSnapshotRepeats(t *testing.T) {
	addrs, srvs := realN(t, 3)
	raws := rawClients(t, addrs)
	ctx := ctxT(t)
	cycle := func(lk *redlock.Locker) uint64 { return fencedCycle(t, lk, "snap") }
	// The counters exist before the first acquisition, as after earlier
	// ones: a missing counter is seeded from its server's clock when the
	// acquire reaches it, so that an instance reached late (a loaded
	// machine) would seed it above the guess of the others and keep a
	// counter of its own.
	for _, c := range raws {
		if err := c.Set(ctx, redlock.FenceKey("snap"), 1, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	first := newLocker(t, addrs, redistest.GoRedis, redlock.Options{Fence: true})
	stopped := time.Now().Add(-time.Minute)
	behind := func() time.Time { return stopped }
	redlock.SetGuessClock(first, behind)
	// A cycle returns when every instance has answered or when its
	// instance timeout has passed, which a loaded machine exceeds: the
	// request of an instance that had not answered then may still land,
	// after the snapshot. Wait for it on every instance. (A request still
	// on its way at the crash goes to the process that dies: no retries.)
	everywhere(t, raws, "snap", cycle(first))
	for _, c := range raws {
		if err := c.Save(ctx).Err(); err != nil { // the snapshot: counters as they are now
			t.Fatal(err)
		}
	}
	issued := map[uint64]bool{}
	for range 3 {
		issued[cycle(first)] = true
	}
	for _, s := range srvs {
		s.Kill() // a crash: the snapshot is all that is left
		if err := s.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	other := newLocker(t, addrs, redistest.GoRedis, redlock.Options{Fence: true})
	redlock.SetGuessClock(other, behind)
	f := cycle(other)
	if !issued[f] {
		t.Fatalf("after restarts from an old snapshot the fence is %d, not one of those issued since it (%v): the weakness is gone? update the docs", f, issued)
	}
	t.Logf("fence %d issued again after the masters restarted from an older snapshot", f)
}

// everywhere waits, bounded, until the fence counter of key is fence on
// every instance.
func everywhere(t *testing.T, raws []*goredis.Client, key string, fence uint64) {
	t.Helper()
	want := strconv.FormatUint(fence, 10)
	until := time.Now().Add(10 * time.Second)
	for {
		got := counters(t, raws, key)
		if !slices.ContainsFunc(got, func(v string) bool { return v != want }) {
			return
		}
		if time.Now().After(until) {
			t.Fatalf("the fence counters of %q are %v; want %s on every instance", key, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

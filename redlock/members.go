package redlock

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/redisclient"
)

// MembersKey is the hash, on every master, in which fenced Lockers
// (Options.Fence) register the set of masters they use: one field per set
// and Prefix, holding when the registration ends and the masters'
// addresses. It is server-wide, outside any prefix, like EpochKey, and
// expires FenceCounterTTL after the last registration written to it.
//
// A fenced Locker reads the registrations on every master and registers
// its own at New and every quarter of FenceCounterTTL while it is open, and
// refuses to acquire (lockswap.ErrInvalid) while a master holds a live
// registration of the same Prefix whose set differs from its own by more
// than one master: two such sets can have majorities that do not meet, and
// their fences could repeat (assumption A1 of docs/redlock-fencing.md). Sets
// one master apart always have majorities that meet, which is why the
// masters change one at a time (docs/redlock.md, "Changing the masters").
const MembersKey = "lockswap:redlock:members"

//go:embed members.lua
var membersLua string

var membersScript = redisclient.NewScript(membersLua)

// membership is a fenced Locker's registration of its masters on them
// (MembersKey) and the state of its last round. The rounds run on the
// Locker's background group: the first at New, the next a quarter of
// FenceCounterTTL after a round that succeeded (so the registration lives
// as long as the Locker is open, whether it acquires or only extends), a
// second after one that did not. An acquisition reads the last round's
// state (one atomic load), and waits only for the first round.
type membership struct {
	field  string // the registration's field: the masters' ids, sorted, and Prefix
	addrs  string // the masters' names or addresses, sorted, for messages
	ttl    time.Duration
	state  atomic.Pointer[memberState]
	first  chan struct{} // closed when the first round has ended (or cannot run)
	once   sync.Once
	denied atomic.Bool // MsgMembersUnchecked written for masters that refused the script

	mu     sync.Mutex
	timer  *time.Timer // the next round
	closed bool        // stop: no more rounds
}

// memberState is what a membership round found, and until when it holds.
type memberState struct {
	until      time.Time // when the next round is due
	err        error     // a conflict (lockswap.ErrInvalid): acquisitions fail with it until a round finds none
	registered bool      // the round registered the set on a majority
}

// newMembership returns the membership of a fenced Locker over inst, or
// nil and the masters whose address the client does not say (a redigo
// pool given none, a go-redis failover client, a rueidis client made
// without an address): without every master's name there is no set to
// compare. names, when not empty, name the masters instead of their
// addresses (Options.MasterNames).
func newMembership(inst []instance, prefix string, names []string) (*membership, []string) {
	ids := make([]string, len(inst))
	addrs := make([]string, len(inst))
	var unknown []string
	for i := range inst {
		a := inst[i].c.Addr()
		if len(names) != 0 {
			a = names[i]
		}
		if a == "" {
			unknown = append(unknown, inst[i].c.String())
			continue
		}
		sum := sha256.Sum256([]byte(a))
		ids[i], addrs[i] = hex.EncodeToString(sum[:6]), a
	}
	if unknown != nil {
		return nil, unknown
	}
	slices.Sort(ids)
	slices.Sort(addrs)
	return &membership{
		field: strings.Join(ids, ",") + " " + prefix,
		addrs: strings.Join(addrs, " "),
		first: make(chan struct{}),
	}, nil
}

// memberLifetime is how long a registration lives: FenceCounterTTL, the
// longest a counter written under it lives (tests shorten both:
// SetFenceCounterTTL).
func memberLifetime() time.Duration {
	ms, _ := strconv.ParseInt(counterTTLArg().(string), 10, 64)
	return time.Duration(ms) * time.Millisecond
}

// admit returns the conflict the last round found. Before the first round
// has ended it waits for it, within ctx (an attempt whose ctx ends first
// is admitted, and ends on ctx as it would have). A round that did not
// reach a majority of the masters admits acquisitions, which decide on
// their own answers.
func (m *membership) admit(ctx context.Context) error {
	st := m.state.Load()
	if st == nil {
		select {
		case <-m.first:
		case <-ctx.Done():
			return nil
		}
		if st = m.state.Load(); st == nil {
			return nil
		}
	}
	return st.err
}

// start runs the first round now, on p's background group, and schedules
// the next ones after it.
func (m *membership) start(p *proto, ttl time.Duration) {
	m.ttl = ttl
	m.schedule(p, 0)
}

// schedule runs a round after d, unless stop was called.
func (m *membership) schedule(p *proto, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		m.endFirst()
		return
	}
	m.timer = time.AfterFunc(d, func() {
		if !p.bg.Go(func(ctx context.Context) { m.run(ctx, p) }) {
			m.endFirst() // Close has begun
		}
	})
}

// run runs one round, publishes what it found and schedules the next.
func (m *membership) run(ctx context.Context, p *proto) {
	st := m.round(ctx, p)
	m.state.Store(st)
	m.endFirst()
	m.schedule(p, time.Until(st.until))
}

func (m *membership) endFirst() { m.once.Do(func() { close(m.first) }) }

// stop ends the rounds (the Locker's Close): the next is not run, and one
// running ends with the background group's context.
func (m *membership) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	if m.timer != nil {
		m.timer.Stop()
	}
	m.endFirst()
}

// round checks the registrations on every master at once, then, when no
// master showed a conflict and a majority answered, registers this
// Locker's set on those that answered. Each pass is bounded by a cleanup
// round (MinCleanupRound at least) and ctx. A conflict the second pass
// meets (another set registered between the passes) is answered by
// removing this Locker's registration where the pass wrote it, so that a
// refused Locker leaves none.
func (m *membership) round(ctx context.Context, p *proto) *memberState {
	start := time.Now()
	life := memberLifetime()
	again := &memberState{until: start.Add(min(time.Second, life/4))}
	all := uint64(1)<<len(p.inst) - 1
	clean, refused, err := m.call(ctx, p, all, "0")
	if err == nil && ones(clean) >= p.quorum {
		if betweenPasses != nil {
			betweenPasses()
		}
		var done uint64
		done, refused, err = m.call(ctx, p, clean, "1")
		if err == nil && ones(done) >= p.quorum {
			return &memberState{until: start.Add(life / 4), registered: true}
		}
		if err != nil {
			m.unregister(ctx, p, done)
		}
	}
	again.err = err
	if err == nil && refused != nil {
		// Masters that refuse the script (an ACL without its rights, a
		// renamed command) will not take it a second later: say so once,
		// and ask again at the usual interval.
		again.until = start.Add(life / 4)
		if m.denied.CompareAndSwap(false, true) {
			p.logDenied(refused)
		}
	}
	return again
}

// betweenPasses, when set (tests: SetBetweenPasses), runs between a
// round's check and its registration.
var betweenPasses func()

// unregister removes this Locker's registration from the masters in mask,
// bounded by a cleanup round and ctx.
func (m *membership) unregister(ctx context.Context, p *proto, mask uint64) {
	ctx, cancel := context.WithTimeout(ctx, p.cleanupRound(m.ttl))
	defer cancel()
	var wg sync.WaitGroup
	for i := range p.inst {
		if mask&(1<<i) != 0 {
			wg.Go(func() { p.inst[i].c.Do(ctx, "HDEL", MembersKey, m.field) })
		}
	}
	wg.Wait()
}

// call runs the membership script on the masters in mask at once (register
// "1" or "0") and returns those that answered without a conflict, the
// errors of those that refused the script with an error retrying cannot
// fix (NOPERM, an unknown command), and the conflict of the first master
// (in the Locker's order) that showed one.
func (m *membership) call(ctx context.Context, p *proto, mask uint64, register string) (uint64, []string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cleanupRound(m.ttl))
	defer cancel()
	keys := []string{MembersKey}
	life := strconv.FormatInt(memberLifetime().Milliseconds(), 10)
	errs := make([]error, len(p.inst))
	perm := make([]string, len(p.inst))
	var clean atomic.Uint64
	var wg sync.WaitGroup
	for i := range p.inst {
		if mask&(1<<i) == 0 {
			continue
		}
		wg.Go(func() {
			in := p.inst[i].c
			v, err := in.Run(ctx, membersScript, keys, m.field, m.addrs, life, register)
			if err != nil {
				if redisclient.IsPermanent(err) {
					perm[i] = fmt.Sprintf("%s: %v", in, err)
				}
				return // not counted
			}
			a, _ := v.([]any)
			code := int64(-2)
			if len(a) > 0 {
				code, _ = a[0].(int64)
			}
			switch {
			case code == 1:
				clean.Or(1 << i)
			case code == 0 && len(a) == 3:
				f, _ := a[1].(string)
				val, _ := a[2].(string)
				errs[i] = m.conflict(in.String(), f, val)
			case code == -1 && len(a) == 2:
				errs[i] = fmt.Errorf("%s on %s holds a %v, not lockswap's registrations of masters: delete it (it is rebuilt): %w",
					MembersKey, in, a[1], lockswap.ErrInvalid)
			}
		})
	}
	wg.Wait()
	var refused []string
	for _, r := range perm {
		if r != "" {
			refused = append(refused, r)
		}
	}
	for _, err := range errs {
		if err != nil {
			return clean.Load(), refused, err
		}
	}
	return clean.Load(), refused, nil
}

// conflict is the error of a registration (field f, value v) found on
// master inst whose set is more than one master away from m's.
func (m *membership) conflict(inst, f, v string) error {
	when, addrs, _ := strings.Cut(v, " ")
	if ms, err := strconv.ParseInt(when, 10, 64); err == nil {
		when = time.UnixMilli(ms).UTC().Format(time.RFC3339)
	}
	_, prefix, _ := strings.Cut(f, " ")
	return fmt.Errorf("the masters differ: %s holds, until %s, the registration of a client of prefix %q whose masters are [%s]; this Locker's are [%s]. "+
		"Sets more than one master apart can have majorities that do not meet, and their fences could repeat: give every client of a prefix the same masters, "+
		"and change them one master at a time, waiting for the old set's registrations to end (docs/redlock.md, \"Changing the masters\"): %w",
		inst, when, prefix, addrs, m.addrs, lockswap.ErrInvalid)
}

// logDenied writes MsgMembersUnchecked for masters that refused the
// membership script (refused: each master and its error), once per Locker.
func (p *proto) logDenied(refused []string) {
	if p.log == nil {
		return
	}
	p.log.LogAttrs(context.Background(), slog.LevelWarn, MsgMembersUnchecked,
		slog.Any("instances", refused),
		slog.String("reason", "these masters refuse the membership script, so this Locker acquires without comparing its masters with other clients': give the user ~"+MembersKey+" +hgetall +hset +hdel +pexpireat (docs/security.md); it asks again every quarter of FenceCounterTTL"))
}

// logUnchecked writes MsgMembersUnchecked for a fenced Locker whose
// masters' addresses are not all known.
func (p *proto) logUnchecked(unknown []string) {
	if p.log == nil {
		return
	}
	p.log.LogAttrs(context.Background(), slog.LevelWarn, MsgMembersUnchecked,
		slog.Any("instances", unknown),
		slog.String("reason", "the client does not say which server it reaches, so this Locker cannot register its masters or compare them with other clients'; every client must still use the same masters (docs/redlock.md, \"Changing the masters\")"))
}

// checkMasterNames rejects Options.MasterNames that do not name each of n
// masters once.
func checkMasterNames(n int, names []string) error {
	if len(names) == 0 {
		return nil
	}
	if len(names) != n {
		return fmt.Errorf("redlock: %d master names for %d clients: name each master, in the order of the clients: %w", len(names), n, lockswap.ErrInvalid)
	}
	for i, name := range names {
		if strings.TrimSpace(name) == "" {
			return fmt.Errorf("redlock: master name %d of %d is empty: %w", i, n, lockswap.ErrInvalid)
		}
		if j := slices.Index(names[:i], name); j >= 0 {
			return fmt.Errorf("redlock: master names %d and %d are both %q: %w", j, i, name, lockswap.ErrInvalid)
		}
	}
	return nil
}

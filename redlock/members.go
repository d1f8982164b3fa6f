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
	denied atomic.Bool  // MsgMembersUnchecked written for masters that refused the script
	rounds atomic.Int64 // rounds run (tests)

	mu     sync.Mutex
	timer  *time.Timer // the next round
	closed bool        // stop: no more rounds
}

// memberState is what a membership round found, and until when it holds.
type memberState struct {
	until      time.Time       // when the next round is due
	err        error           // a conflict (lockswap.ErrInvalid): acquisitions fail with it until a round finds none
	conflict   *memberConflict // where err was found, and until when it holds
	registered bool            // the round registered the set on a majority
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
	m.rounds.Add(1)
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
// removing the registration where this pass created it, so that a refused
// Locker leaves none. A conflict seen before stays until the other
// registration's end, unless the master that showed it answers without
// it: a master that stops answering does not make the Locker forget.
func (m *membership) round(ctx context.Context, p *proto) *memberState {
	start := time.Now()
	life := memberLifetime()
	all := uint64(1)<<len(p.inst) - 1
	r := m.call(ctx, p, all, "0")
	if r.conflict == nil {
		if old := m.state.Load(); old != nil && old.conflict != nil && r.answered&(1<<old.conflict.inst) == 0 && start.Before(old.conflict.until) {
			r.conflict = old.conflict
		}
	}
	if r.conflict == nil && ones(r.clean) >= p.quorum {
		if betweenPasses != nil {
			betweenPasses()
		}
		reg := m.call(ctx, p, r.clean, "1")
		if reg.conflict != nil {
			m.unregister(ctx, p, reg.created)
		}
		r.conflict, r.refused = reg.conflict, append(r.refused, reg.refused...)
		if reg.conflict == nil && ones(reg.clean) >= p.quorum {
			m.logRefused(p, r.refused)
			return &memberState{until: start.Add(life / 4), registered: true}
		}
	}
	m.logRefused(p, r.refused)
	st := &memberState{until: start.Add(min(time.Second, life/4)), conflict: r.conflict}
	if r.conflict != nil {
		st.err = r.conflict.err
	} else if len(r.refused) > len(p.inst)-p.quorum {
		// Masters that refuse the script (an ACL without its rights, a
		// renamed command) leave no majority, and will not take it a
		// second later: ask again at the usual interval.
		st.until = start.Add(life / 4)
	}
	return st
}

// logRefused writes MsgMembersUnchecked, once per Locker, for masters that
// refused the membership script (refused: each master and its error).
func (m *membership) logRefused(p *proto, refused []string) {
	if len(refused) > 0 && m.denied.CompareAndSwap(false, true) {
		p.logDenied(refused)
	}
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

// passResult is what one pass of a round found.
type passResult struct {
	answered uint64          // masters that answered the script
	clean    uint64          // of those, the ones without a conflict (registered, in the register pass)
	created  uint64          // register pass: masters where this pass created the field
	refused  []string        // masters that refused the script with an error retrying cannot fix, and the error
	conflict *memberConflict // the first master's conflict (in the Locker's order)
}

// memberConflict is a conflicting registration a round found.
type memberConflict struct {
	inst  int       // the master that holds it
	until time.Time // the registration's end, by the master's clock
	err   error
}

// call runs the membership script on the masters in mask at once (register
// "1" or "0").
func (m *membership) call(ctx context.Context, p *proto, mask uint64, register string) passResult {
	ctx, cancel := context.WithTimeout(ctx, p.cleanupRound(m.ttl))
	defer cancel()
	keys := []string{MembersKey}
	life := strconv.FormatInt(memberLifetime().Milliseconds(), 10)
	conflicts := make([]*memberConflict, len(p.inst))
	perm := make([]string, len(p.inst))
	var answered, clean, created atomic.Uint64
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
				answered.Or(1 << i)
				clean.Or(1 << i)
				if len(a) == 2 && isOne(a[1]) {
					created.Or(1 << i)
				}
			case code == 0 && len(a) == 3:
				answered.Or(1 << i)
				f, _ := a[1].(string)
				val, _ := a[2].(string)
				conflicts[i] = m.conflict(i, in.String(), f, val)
			case code == -1 && len(a) == 2:
				answered.Or(1 << i)
				conflicts[i] = &memberConflict{inst: i, until: time.Now().Add(time.Second), err: fmt.Errorf(
					"%s on %s holds a %v, not lockswap's registrations of masters: delete it (it is rebuilt): %w",
					MembersKey, in, a[1], lockswap.ErrInvalid)}
			}
		})
	}
	wg.Wait()
	r := passResult{answered: answered.Load(), clean: clean.Load(), created: created.Load()}
	for _, x := range perm {
		if x != "" {
			r.refused = append(r.refused, x)
		}
	}
	for _, c := range conflicts {
		if c != nil {
			r.conflict = c
			break
		}
	}
	return r
}

// conflict describes a registration (field f, value v) found on master i
// (named inst) whose set is more than one master away from m's.
func (m *membership) conflict(i int, inst, f, v string) *memberConflict {
	when, addrs, _ := strings.Cut(v, " ")
	until := time.Now().Add(time.Second)
	if ms, err := strconv.ParseInt(when, 10, 64); err == nil {
		until = time.UnixMilli(ms)
		when = until.UTC().Format(time.RFC3339)
	}
	_, prefix, _ := strings.Cut(f, " ")
	return &memberConflict{inst: i, until: until, err: fmt.Errorf("the masters differ: %s holds, until %s, the registration of a client of prefix %q whose masters are [%s]; this Locker's are [%s]. "+
		"Sets more than one master apart can have majorities that do not meet, and their fences could repeat: give every client of a prefix the same masters, "+
		"and change them one master at a time, waiting for the old set's registrations to end (docs/redlock.md, \"Changing the masters\"): %w",
		inst, when, prefix, addrs, m.addrs, lockswap.ErrInvalid)}
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

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
// A fenced Locker reads the registrations on every master before its
// first acquisition and every quarter of FenceCounterTTL after, and
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
// (MembersKey) and the state of its last round.
type membership struct {
	field  string        // the registration's field: the masters' ids, sorted, and Prefix
	addrs  string        // the masters' addresses, sorted, for messages
	turn   chan struct{} // one round at a time
	state  atomic.Pointer[memberState]
	denied atomic.Bool // MsgMembersUnchecked written for masters that refused the script
}

// memberState is what a membership round found, and until when it holds.
type memberState struct {
	until time.Time // when the next round is due
	err   error     // a conflict (lockswap.ErrInvalid): acquisitions fail with it until then
}

// newMembership returns the membership of a fenced Locker over inst, or
// nil and the masters whose address the client does not know (a redigo
// pool given none, a go-redis failover client): without every address
// there is no set to compare.
func newMembership(inst []instance, prefix string) (*membership, []string) {
	ids := make([]string, len(inst))
	addrs := make([]string, len(inst))
	var unknown []string
	for i := range inst {
		a := inst[i].c.Addr()
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
		turn:  make(chan struct{}, 1),
	}, nil
}

// memberLifetime is how long a registration lives: FenceCounterTTL, the
// longest a counter written under it lives (tests shorten both:
// SetFenceCounterTTL).
func memberLifetime() time.Duration {
	ms, _ := strconv.ParseInt(counterTTLArg().(string), 10, 64)
	return time.Duration(ms) * time.Millisecond
}

// admit returns the conflict the last round found, running a round first
// when one is due (one caller at a time; the others wait for it, within
// ctx). A round that did not reach a majority of the masters admits the
// acquisition, which decides on its own answers, and runs again a second
// later.
func (m *membership) admit(ctx context.Context, p *proto, ttl time.Duration) error {
	if st := m.state.Load(); st != nil && time.Now().Before(st.until) {
		return st.err
	}
	select {
	case m.turn <- struct{}{}:
	case <-ctx.Done():
		return nil // the attempt ends on ctx as it would have
	}
	defer func() { <-m.turn }()
	if st := m.state.Load(); st != nil && time.Now().Before(st.until) {
		return st.err
	}
	st := m.round(ctx, p, ttl)
	m.state.Store(st)
	return st.err
}

// round checks the registrations on every master at once, then, when no
// master showed a conflict and a majority answered, registers this
// Locker's set on those that answered. It is bounded by ctx and a cleanup
// round (MinCleanupRound at least).
func (m *membership) round(ctx context.Context, p *proto, ttl time.Duration) *memberState {
	start := time.Now()
	life := memberLifetime()
	again := &memberState{until: start.Add(min(time.Second, life/4))}
	until := start.Add(p.cleanupRound(ttl))
	if d, ok := ctx.Deadline(); ok {
		until = earliest(until, d)
	}
	rctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	all := uint64(1)<<len(p.inst) - 1
	clean, refused, err := m.call(rctx, p, all, "0")
	if err == nil && ones(clean) >= p.quorum {
		var done uint64
		done, refused, err = m.call(rctx, p, clean, "1")
		if err == nil && ones(done) >= p.quorum {
			return &memberState{until: start.Add(life / 4)}
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

// call runs the membership script on the masters in mask at once (register
// "1" or "0") and returns those that answered without a conflict, the
// errors of those that refused the script with an error retrying cannot
// fix (NOPERM, an unknown command), and the conflict of the first master
// (in the Locker's order) that showed one.
func (m *membership) call(ctx context.Context, p *proto, mask uint64, register string) (uint64, []string, error) {
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

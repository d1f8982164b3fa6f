package redlock

import (
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/logtest"
	"github.com/lockswap/lockswap/redisclient"
)

// named is a client that only has a name (logQuarantine asks for nothing
// else).
type named struct {
	redisclient.Client
	name string
}

func (n named) String() string { return n.name }

// TestLogQuarantineConcurrentCalls: calls that end together, all seeing
// the same instances enter a quarantine, write one record naming them all,
// not one record each for the instances they happened to get to first.
// (TestLogQuarantine, on real servers, failed that way under load once.)
func TestLogQuarantineConcurrentCalls(t *testing.T) {
	rec := logtest.New()
	p := &proto{inst: make([]instance, 3), quorum: 2, log: rec.Logger(), opts: Options{MaxTTL: time.Second}}
	for i := range p.inst {
		p.inst[i].c = named{name: fmt.Sprintf("instance-%d", i)}
	}
	const rounds, calls = 200, 8
	for round := range rounds {
		until := time.Now().Add(time.Minute)
		for i := range p.inst { // every instance restarted: new epochs
			p.inst[i].epoch.Store(&epochState{value: fmt.Sprintf("epoch-%d", round), until: until})
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				p.logQuarantine()
			}()
		}
		close(start)
		wg.Wait()
		got := rec.Records()
		if len(got) != round+1 {
			t.Fatalf("round %d: %d records in all, want %d (one per round): %v", round, len(got), round+1, got[len(got)-min(len(got), 3):])
		}
		if n := len(got[round].Attrs["instances"].Any().([]string)); n != 3 {
			t.Fatalf("round %d: the record names %d instances, want the 3: %v", round, n, got[round])
		}
	}
}

// TestLogEpochAhead: an epoch more than a second ahead of its server's
// clock is logged once, with the quarantine it causes, naming only the
// instances it is on; a fresh epoch or one a moment ahead (a clock set
// back a little) is only the quarantine.
func TestLogEpochAhead(t *testing.T) {
	rec := logtest.New()
	opts := Options{RestartSafety: true, MaxTTL: time.Minute, DriftFactor: DefaultDriftFactor, DriftFixed: DefaultDriftFixed}
	p := &proto{inst: make([]instance, 3), quorum: 2, log: rec.Logger(), opts: opts}
	for i := range p.inst {
		p.inst[i].c = named{name: fmt.Sprintf("instance-%d", i)}
	}
	now := time.Now().Unix()
	c := &call{lk: p, res: make([]result, 3), epochs: make([]*epochState, 3)}
	for i, epoch := range []string{"4102444800.0.future", fmt.Sprintf("%d.0.fresh", now), fmt.Sprintf("%d.500000.slack", now)} {
		c.safeReply(i, []any{int64(1), epoch, strconv.FormatInt(now, 10), "0"})
	}
	for range 2 {
		p.logQuarantine()
	}
	q, ahead := rec.Find(MsgQuarantine), rec.Find(MsgEpochAhead)
	if len(q) != 1 || len(ahead) != 1 || len(rec.Records()) != 2 {
		t.Fatalf("records %v; want one %q and one %q", rec.Records(), MsgQuarantine, MsgEpochAhead)
	}
	if left := q[0].Attrs["left"].Duration(); left > p.maxQuarantine() {
		t.Errorf("quarantine left %v, above MaxTTL plus drift %v", left, p.maxQuarantine())
	}
	r := ahead[0]
	if got := r.Attrs["instances"].Any().([]string); len(got) != 1 || got[0] != "instance-0" {
		t.Errorf("instances %v; want [instance-0], the one with the year 2100 epoch", got)
	}
	if a := r.Attrs["ahead"].Duration(); a < 70*365*24*time.Hour {
		t.Errorf("ahead %v; want the 73 years to 2100", a)
	}
	if r.Level != slog.LevelWarn || r.String("reason") == "" || r.Attrs["max_ttl"].Duration() != time.Minute {
		t.Errorf("record %v: want WARN with a reason and max_ttl", r)
	}
}

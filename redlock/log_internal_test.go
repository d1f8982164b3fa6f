package redlock

import (
	"fmt"
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

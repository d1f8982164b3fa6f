package history

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/memlock"
)

// TestCheckHolds: overlapping spans beyond what the kinds allow are
// violations, described; touching spans, and holds of other keys, are not.
func TestCheckHolds(t *testing.T) {
	p := func(client int, limit int, from, to int64) Hold {
		return Hold{Client: client, Key: "k", Kind: KindPermit, Limit: limit, From: from, To: to}
	}
	rw := func(client int, kind string, from, to int64) Hold {
		return Hold{Client: client, Key: "k", Kind: kind, From: from, To: to}
	}
	for _, c := range []struct {
		name  string
		holds []Hold
		want  string // a part of the one violation, "" for none
	}{
		{"two permits of limit 2", []Hold{p(0, 2, 0, 10), p(1, 2, 5, 15)}, ""},
		{"three permits of limit 2", []Hold{p(0, 2, 0, 10), p(1, 2, 5, 15), p(2, 2, 8, 12)}, "2 permits of limit 2 were held"},
		{"touching permits of limit 1", []Hold{p(0, 1, 0, 10), p(1, 1, 10, 20)}, ""},
		{"two limits", []Hold{p(0, 3, 0, 10), p(1, 2, 5, 15)}, "permits of limit 3 were held (its limit: 2)"},
		{"readers", []Hold{rw(0, KindRead, 0, 10), rw(1, KindRead, 5, 15)}, ""},
		{"a writer among readers", []Hold{rw(0, KindRead, 0, 10), rw(1, KindWrite, 5, 15)}, "1 read holds were held"},
		{"a reader during a write", []Hold{rw(0, KindWrite, 0, 10), rw(1, KindRead, 9, 15)}, "a write hold was held"},
		{"a permit during a read", []Hold{rw(0, KindRead, 0, 10), p(1, 4, 9, 15)}, "1 read-write holds were held"},
		{"a read during permits", []Hold{p(0, 2, 0, 10), rw(1, KindRead, 5, 15)}, "1 permits were held"},
		{"a mutex during a read", []Hold{rw(0, KindRead, 0, 10), rw(1, KindMutex, 5, 15)}, "1 other holds were held"},
		{"a read during a mutex", []Hold{rw(0, KindMutex, 0, 10), rw(1, KindRead, 5, 15)}, "a mutex's lock was held"},
		{"a limit of 0", []Hold{p(0, 0, 0, 10)}, "its limit 0 is below 1"},
		{"an empty span", []Hold{rw(0, KindWrite, 0, 10), rw(1, KindWrite, 5, 5)}, ""},
		{"other keys", []Hold{rw(0, KindWrite, 0, 10), {Client: 1, Key: "other", Kind: KindWrite, From: 5, To: 15}}, ""},
	} {
		v := CheckHolds(c.holds)
		switch {
		case c.want == "" && len(v) > 0:
			t.Errorf("%s: violations %q, want none", c.name, v)
		case c.want != "" && (len(v) != 1 || !strings.Contains(v[0], c.want)):
			t.Errorf("%s: violations %q, want one naming %q", c.name, v, c.want)
		}
	}
}

// TestHeldRecordsDeadline: Held records a hold's kind, its limit, and a
// span that ends at the lock's deadline when that passed before.
func TestHeldRecordsDeadline(t *testing.T) {
	ctx := context.Background()
	lk := memlock.New(memlock.NewStore())
	defer lk.Close()
	rec := NewHoldRecorder()
	from := time.Now()
	l, err := lk.TryAcquire(ctx, "k", lockswap.WithPermits(3), lockswap.WithTTL(lockswap.MinTTL))
	if err != nil {
		t.Fatal(err)
	}
	<-l.Done() // past its deadline
	rec.Held(7, l, 3, from)
	r, err := lk.TryAcquire(ctx, "rw", lockswap.WithRead())
	if err != nil {
		t.Fatal(err)
	}
	rec.Held(8, r, 0, time.Now())
	hs := rec.Holds()
	if len(hs) != 2 {
		t.Fatalf("%d holds, want 2", len(hs))
	}
	h := hs[0]
	if h.Client != 7 || h.Kind != KindPermit || h.Limit != 3 || h.Token != l.Token() {
		t.Errorf("permit hold = %+v", h)
	}
	if end := rec.start.Add(time.Duration(h.To)); !end.Equal(l.Deadline()) {
		t.Errorf("the span ends at %v, want the deadline %v", end, l.Deadline())
	}
	if hs[1].Kind != KindRead || hs[1].Limit != 0 {
		t.Errorf("read hold = %+v", hs[1])
	}
	m, err := lk.TryAcquire(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	rec.Held(9, m, 0, time.Now())
	if h := rec.Holds()[2]; h.Kind != KindMutex {
		t.Errorf("a mutex's lock recorded as %+v, want kind mutex", h)
	}
}

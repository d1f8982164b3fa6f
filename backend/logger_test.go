package backend_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/backend"
	"github.com/lockswap/lockswap/driver"
	"github.com/lockswap/lockswap/internal/logtest"
)

// TestClientsLogger: a logger given in Clients reaches the backend opened
// from a URL, which then logs the events a person must see (here a lock
// lost to its deadline).
func TestClientsLogger(t *testing.T) {
	c, err := backend.ParseURL("memlock://?store=clients-logger")
	if err != nil {
		t.Fatal(err)
	}
	rec := logtest.New()
	lk, err := backend.Open(context.Background(), c, backend.Clients{Logger: rec.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	ctx := context.Background()
	l, err := lk.Acquire(ctx, "k", lockswap.WithTTL(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	l.Release(ctx)
	if r := rec.Wait(t, driver.MsgLockLost, 5*time.Second); r.String("backend") != "memlock" {
		t.Errorf("record %+v, want backend=memlock", r)
	}
}

package redigo_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/redigo"
)

func TestNilPool(t *testing.T) {
	if redigo.New(nil) != nil || redigo.NewNamed(nil, "x") != nil {
		t.Error("adapters of nil pools must be nil, so that backends reject them")
	}
}

// TestSplitter: the redigo adapter pipelines commands on one connection and
// reads the replies in order.
func TestSplitter(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redistest.Redigo(t, mr.Addr())
	sp, ok := c.(redisclient.Splitter)
	if !ok {
		t.Fatal("the redigo adapter does not implement Splitter")
	}
	conn, err := sp.Split(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Send("SET", "a", "1", "NX", "PX", 1000)
	conn.Send("SET", "a", "2", "NX", "PX", 1000)
	conn.Send("GET", "a")
	conn.Send("HSET", "a", "f", "v")
	if err := conn.Flush(); err != nil {
		t.Fatal(err)
	}
	want := []any{"OK", nil, "1"}
	for i, w := range want {
		v, err := conn.Receive(time.Second)
		if err != nil || v != w {
			t.Errorf("reply %d = %#v, %v; want %#v", i, v, err, w)
		}
	}
	if _, err := conn.Receive(time.Second); !redisclient.IsWrongType(err) {
		t.Errorf("pipelined error reply: %v, want WRONGTYPE matching ErrReply", err)
	}
	if _, ok := redistest.GoRedis(t, mr.Addr()).(redisclient.Splitter); ok {
		t.Error("go-redis adapter claims Splitter; it cannot split send and receive")
	}
}

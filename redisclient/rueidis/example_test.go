package rueidis_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	rueidislib "github.com/redis/rueidis"

	"github.com/lockswap/lockswap/redisclient/rueidis"
)

func Example() {
	mr, _ := miniredis.Run()
	defer mr.Close()

	c, err := rueidislib.NewClient(rueidislib.ClientOption{InitAddress: []string{mr.Addr()}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	// NewNamed gives the client its identity: the address and database.
	rc := rueidis.NewNamed(c, mr.Addr()+"/0")

	ctx := context.Background()
	ok, _ := rc.SetNX(ctx, "k", "v")
	v, _, _ := rc.Get(ctx, "k")
	fmt.Println(ok, v)
	// Output: true v
}

// ExampleNewClient makes a rueidis client as lockswap needs it for locks
// that cost no more than the client's own commands (AlwaysPipelining, the
// handshake watched), for the program's other commands too.
func ExampleNewClient() {
	mr, _ := miniredis.Run()
	defer mr.Close()

	client, rc, err := rueidis.NewClient(rueidislib.ClientOption{InitAddress: []string{mr.Addr()}, ForceSingleClient: true, DisableCache: true})
	if client == nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	ctx := context.Background()
	ok, _ := rc.SetNX(ctx, "k", "v")
	v, _ := client.Do(ctx, client.B().Get().Key("k").Build()).ToString()
	fmt.Println(ok, v)
	// Output: true v
}

package redisclient

import (
	"context"
	"io"
)

// Subscriber is implemented by adapters that can receive Redis Pub/Sub
// messages: singleredis's fair wait (Options.FairWait) is woken through it
// when a releasing holder hands it the lock. The go-redis, redigo and
// rueidis adapters implement it.
type Subscriber interface {
	// Subscribe subscribes to channel on a connection of its own (not one
	// of the pool's request connections) and returns once the server has
	// confirmed the subscription, or with ctx's error. From then on it
	// calls deliver, from one goroutine, with the payload of each message,
	// until the returned Closer's Close, which ends that goroutine and
	// waits for it. When the connection breaks it reconnects and
	// subscribes again until Close; messages published meanwhile are lost
	// (Pub/Sub delivers at most once), so a user must be able to repair a
	// lost message by other means.
	Subscribe(ctx context.Context, channel string, deliver func(payload string)) (io.Closer, error)
}

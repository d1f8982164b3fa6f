package localq_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lockswap/lockswap"
)

// A Locker routes Acquire through its localq.Queue and tells it about releases.
// Here three goroutines wait for a key the first caller holds; each takes
// it in turn, in arrival order, as soon as the previous one releases.
func Example() {
	s := newStore()
	ctx, key := context.Background(), "job"
	retry := lockswap.ConstantRetry(time.Hour) // only releases wake the waiters
	held, _ := s.q.Acquire(ctx, key, retry, s.try(key, 0))

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		order []int
	)
	for id := 1; id <= 3; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := s.q.Acquire(ctx, key, retry, s.try(key, id))
			if err != nil {
				fmt.Println(err)
				return
			}
			mu.Lock()
			order = append(order, id)
			mu.Unlock()
			l.Release(ctx) // the fake lock calls s.q.Released(key, l)
		}()
		for s.q.Waiting(key) < id { // wait until it is in line
			time.Sleep(time.Millisecond)
		}
	}
	held.Release(ctx)
	wg.Wait()
	fmt.Println(order, s.q.Keys())
	// Output: [1 2 3] 0
}

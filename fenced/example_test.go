package fenced_test

import (
	"errors"
	"fmt"

	"github.com/lockswap/lockswap/fenced"
)

func Example() {
	var db fenced.Resource
	// A holder with fence 7 writes; then a holder that paused and woke up
	// with its old fence 6 tries to write.
	fmt.Println(db.Write("new holder", 7))
	err := db.Write("paused holder", 6)
	fmt.Println(errors.Is(err, fenced.ErrStale))
	// Output:
	// <nil>
	// true
}

// A resource guarded by a semaphore's permits checks fences per slot.
func ExampleSlots() {
	var pool fenced.Slots
	// Slot 0 went from a holder with fence 3 to one with fence 4; slot 1
	// has a holder with fence 1 (fences rise per slot, not across them).
	fmt.Println(pool.Write("new holder of slot 0", 0, 4))
	fmt.Println(pool.Write("holder of slot 1", 1, 1))
	err := pool.Write("paused holder of slot 0", 0, 3)
	fmt.Println(errors.Is(err, fenced.ErrStale))
	// Output:
	// <nil>
	// <nil>
	// true
}

// A resource guarded by a read-write lock checks writes against every
// hold seen, and reads against the writes.
func ExampleRW() {
	var doc fenced.RW
	// Readers with fences 5 and 6 read at once; a writer that lost its
	// write hold (fence 4) to them is rejected.
	fmt.Println(doc.Read("reader 5", 5), doc.Read("reader 6", 6))
	fmt.Println(errors.Is(doc.Write("paused writer", 4), fenced.ErrStale))
	// The next writer (fence 7) writes; a reader that lost its read hold
	// (fence 6) is rejected after that.
	fmt.Println(doc.Write("writer 7", 7))
	fmt.Println(errors.Is(doc.Read("paused reader 6", 6), fenced.ErrStale))
	// Output:
	// <nil> <nil>
	// true
	// <nil>
	// true
}

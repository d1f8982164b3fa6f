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

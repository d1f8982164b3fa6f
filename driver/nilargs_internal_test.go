package driver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
)

// TestNilLock: Extend and Release of a nil lock return ErrInvalid instead
// of a panic, and Data of one reports no data.
func TestNilLock(t *testing.T) {
	var l *lock[int]
	ctx := context.Background()
	for what, call := range map[string]func() error{
		"extend":  func() error { return l.Extend(ctx, time.Second) },
		"release": func() error { return l.Release(ctx) },
	} {
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = errors.New("panic")
				}
			}()
			return call()
		}()
		if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), what+" of a nil lock") {
			t.Errorf("%s of a nil lock: %v, want ErrInvalid", what, err)
		}
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("Data of a nil lock panicked: %v", p)
			}
		}()
		if _, ok := Data[int](l); ok {
			t.Error("Data of a nil lock: ok")
		}
	}()
}

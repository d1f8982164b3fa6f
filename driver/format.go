package driver

import "fmt"

// String describes the lock for people: its backend, and its fence when
// it has one; not its key (keys may be sensitive, see Config.LogKeys) nor
// its token. fmt uses it for %v, %+v and %s, and GoString for %#v, instead
// of reading the lock's fields: the kit's goroutines change them meanwhile
// (the race detector caught a client's context watcher against a %+v of a
// Lock), and they hold the token.
func (l *lock[D]) String() string {
	if f, ok := l.Fence(); ok {
		return fmt.Sprintf("%s lock (fence %d)", l.lk.cfg.Name, f)
	}
	return l.lk.cfg.Name + " lock"
}

// GoString implements fmt.GoStringer, as String.
func (l *lock[D]) GoString() string { return l.String() }

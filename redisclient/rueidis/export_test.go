package rueidis

import "github.com/lockswap/lockswap/redisclient"

// Dial is dial, the opener of client=rueidis URLs, for the tests.
var Dial = dial

// LateSend is lateSend, the bound of a command flushed after its Split's
// context ended.
const LateSend = lateSend

// InFlight reports whether c, an adapter of this package, has a command
// or batch of its group commit in flight.
func InFlight(c redisclient.Client) bool {
	var a *adapter
	switch x := c.(type) {
	case splitter:
		a = x.adapter
	case *adapter:
		a = x
	default:
		return false
	}
	a.group.mu.Lock()
	defer a.group.mu.Unlock()
	return a.group.busy
}

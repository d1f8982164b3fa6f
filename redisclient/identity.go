package redisclient

import (
	"fmt"
	"reflect"
)

// Store names the data c reaches, to tell whether two clients reach the
// same keys (migrate's refusal of one key for both locks): c.Addr() when it
// is known. A client whose address is unknown is a store of its own,
// named after the client value: two such clients count as different even
// when they reach the same server, so give a redigo pool its address
// (redigo.NewNamed) where that matters.
func Store(c Client) string {
	if a := c.Addr(); a != "" {
		return a
	}
	if v := reflect.ValueOf(c); v.Kind() == reflect.Pointer {
		return fmt.Sprintf("%s (address unknown, client %#x)", c, v.Pointer())
	}
	return fmt.Sprintf("%s (address unknown)", c)
}

// SameStore reports whether a and b are the same client, or reach the same
// keys by [Client.Addr]. Clients of unknown address are the same only when
// they are the same client.
func SameStore(a, b Client) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	if ta == tb && ta.Comparable() && a == b {
		return true
	}
	aa := a.Addr()
	return aa != "" && aa == b.Addr()
}

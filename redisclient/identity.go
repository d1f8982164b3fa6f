package redisclient

import (
	"fmt"
	"reflect"
	"strings"
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

// SameServer reports whether a and b are the same client, or reach the
// same server by [Client.Addr], whatever database they select: two
// databases of one server fail and restart together, so they are not
// independent (Redlock's masters must be). Clients of unknown address are
// the same only when they are the same client.
func SameServer(a, b Client) bool {
	if SameStore(a, b) {
		return true
	}
	sa, sb := server(a.Addr()), server(b.Addr())
	return sa != "" && sa == sb
}

// server is addr without its "/db" suffix.
func server(addr string) string {
	if i := strings.LastIndexByte(addr, '/'); i >= 0 && i+1 < len(addr) && strings.Trim(addr[i+1:], "0123456789") == "" {
		return addr[:i]
	}
	return addr
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

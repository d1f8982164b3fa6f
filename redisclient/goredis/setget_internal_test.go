package goredis

import "testing"

// TestSetGetReply: the raw replies of SET NX PX GET read as a lock expects.
func TestSetGetReply(t *testing.T) {
	for _, c := range []struct {
		raw             string
		set, held, fail bool
	}{
		{raw: "$-1\r\n", set: true},               // RESP2 null: the key was absent
		{raw: "_\r\n", set: true},                 // RESP3 null
		{raw: "$5\r\ntoken\r\n", held: true},      // the holder's value
		{raw: "$0\r\n\r\n", held: true},           // an empty value is a value
		{raw: "-WRONGTYPE Operation\r\n"},         // an error: neither (run again, parsed)
		{raw: "!21\r\nSYNTAX invalid syntax\r\n"}, // a RESP3 blob error
		{raw: "+OK\r\n", fail: true},              // not an answer of SET NX GET
		{raw: ":1\r\n", fail: true},
		{raw: "", fail: true},
	} {
		set, held, err := setGetReply([]byte(c.raw))
		if set != c.set || held != c.held || (err != nil) != c.fail {
			t.Errorf("setGetReply(%q) = %v, %v, %v; want set %v, held %v, error %v", c.raw, set, held, err, c.set, c.held, c.fail)
		}
	}
}

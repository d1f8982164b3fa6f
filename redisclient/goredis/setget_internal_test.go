package goredis

import (
	"errors"
	"testing"

	"github.com/lockswap/lockswap/redisclient"
)

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

// TestFinalError: WRONGTYPE and a syntax error are returned as they are;
// any other error reply, and any other reply, go to go-redis's handling.
func TestFinalError(t *testing.T) {
	for raw, want := range map[string]string{
		"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n": "WRONGTYPE Operation against a key holding the wrong kind of value",
		"-ERR syntax error\r\n":                            "ERR syntax error",
		"-READONLY You can't write against a replica.\r\n": "",
		"-MOVED 3999 127.0.0.1:6381\r\n":                   "",
		"-LOADING Redis is loading\r\n":                    "",
		"$-1\r\n":                                          "",
		"":                                                 "",
	} {
		err := finalError([]byte(raw))
		var re *redisclient.ReplyError
		switch {
		case want == "" && err != nil:
			t.Errorf("finalError(%q) = %v, want nil (go-redis handles it)", raw, err)
		case want != "" && (!errors.As(err, &re) || re.Msg != want):
			t.Errorf("finalError(%q) = %v, want the reply %q", raw, err, want)
		}
	}
}

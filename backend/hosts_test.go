package backend_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/backend"
)

// TestHostListMistakes: a host list with a space after a comma, an empty
// entry, one server listed twice (which Redlock would count twice toward
// its quorum) or a bad port is refused by OpenURL, before anything is
// dialled, with ErrInvalid naming the entry and never the password; the
// JSON Config's addrs are checked the same way.
func TestHostListMistakes(t *testing.T) {
	const pw = "Tr0ub4dor"
	ctx := context.Background()
	for raw, mention := range map[string]string{
		"redlock://a:1, b:1,c:1":        `" b:1"`,
		"redlock://a:1,b:1,c:1 ":        "port",
		"redlock://a:1,,b:1":            "empty entry",
		"redlock://a:1,b:1,c:1,":        "empty entry",
		"redlock://a:1,b:1,a:1":         "hosts 1 and 3 of 3 are the same server",
		"redlock://A:1,b:1,a:01":        "same server",
		"redlock://[::1]:1,b:1,[::1]:1": "same server",
		"redlock://a:1,b,c:1":           `"b": want host:port`,
		"redlock://a:1,b:x,c:1":         "port",
		"redlock://a:1,b:+2,c:1":        `port "+2"`,
		"redlock://a:1,b:0,c:1":         "port",
		"redlock://a:1,b:1\t,c:1":       "port",
		"etcd://a:2379, b:2379":         `" b:2379"`,
		"etcd://a:2379,a:2379":          "same server",
		"etcd://a:2379,,b:2379":         "empty entry",
		"singleredis://h :6379":         "space",
	} {
		for _, u := range []string{raw, strings.Replace(raw, "://", "://app:"+pw+"@", 1)} {
			lk, err := backend.OpenURL(ctx, u)
			if err == nil {
				lk.Close()
				t.Errorf("OpenURL(%q) accepted it", u)
				continue
			}
			if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), mention) {
				t.Errorf("OpenURL(%q): %v, want ErrInvalid mentioning %s", u, err, mention)
			}
			if strings.Contains(err.Error(), pw) {
				t.Errorf("OpenURL(%q): the error shows the password: %v", u, err)
			}
		}
	}
	for _, addrs := range [][]string{{"a:1", " b:1", "c:1"}, {"a:1", "a:1", "c:1"}, {"a:1", "", "c:1"}} {
		if err := (backend.Config{Backend: "redlock", Addrs: addrs}).Validate(); !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("Config{Addrs: %q}.Validate() = %v, want ErrInvalid", addrs, err)
		}
	}
	// Distinct servers, IPv6 included, are accepted.
	if _, err := backend.ParseURL("redlock://a:1,b:1,[::1]:1"); err != nil {
		t.Errorf("three distinct hosts: %v", err)
	}
}

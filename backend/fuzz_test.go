package backend_test

import (
	"errors"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/backend"
)

// FuzzParseURL: any input either parses into a valid Config whose String()
// parses back to the same Config, or fails with ErrInvalid. Run with
//
//	go test -fuzz FuzzParseURL ./backend/
//
// The seed corpus is in testdata/fuzz/FuzzParseURL.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"singleredis://app:s3cret@127.0.0.1:6380/2?ttl=10s&prefix=app:&fence=true",
		"redlock://h1:6379,h2:6379,h3:6379?ttl=10s&drift=0.01&restart_safety=true&max_ttl=1m",
		"legacysetnx://h:6379?prefix=lock.&unit=ms&server_time=true",
		"etcds://u:p@h1:2379,h2:2379?prefix=/locks/&ttl=10s",
		"migrate://?phase=dual&legacy=legacysetnx%3A%2F%2Fh%3A1%3Funit%3Ds&target=singleredis%3A%2F%2Fh%3A1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := backend.ParseURL(raw)
		if err != nil {
			if !errors.Is(err, lockswap.ErrInvalid) {
				t.Fatalf("ParseURL(%q) error %v does not match ErrInvalid", raw, err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("ParseURL(%q) returned a Config that does not validate: %v", raw, err)
		}
		if c.Password != "" {
			// String redacts, so compare without the password.
			c.Password = ""
		}
		back, err := backend.ParseURL(c.String())
		if err != nil {
			t.Fatalf("ParseURL(String()) of %q = %q: %v", raw, c.String(), err)
		}
		back.Password = ""
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip of %q:\n%+v\n%+v", raw, c, back)
		}
	})
}

// FuzzPasswordRedacted: a percent-encoded password never appears in an
// error or in String(), whatever the rest of the URL is.
func FuzzPasswordRedacted(f *testing.F) {
	f.Add("hunter22", "h:6379?ttl=bad")
	f.Add("p@ss/w:rd", "h:6379/x")
	f.Add("longpassword", "a:1,b:1")
	f.Fuzz(func(t *testing.T, pass, rest string) {
		if len(pass) < 6 || strings.ContainsAny(rest, "@") || strings.Contains(rest, pass) || strings.Contains(rest, url.PathEscape(pass)) || strings.Contains(strconv.Quote(rest), pass) {
			return // short passwords, or ones the rest repeats, occur in the text by chance
		}
		raw := "singleredis://user:" + url.PathEscape(pass) + "@" + rest
		c, err := backend.ParseURL(raw)
		if err != nil && (strings.Contains(err.Error(), pass) || strings.Contains(err.Error(), url.PathEscape(pass))) {
			t.Fatalf("error for %q contains the password: %v", raw, err)
		}
		if err == nil && strings.Contains(c.String(), pass) {
			t.Fatalf("String() of %q contains the password: %s", raw, c.String())
		}
	})
}

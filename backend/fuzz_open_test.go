package backend_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/backend"
)

// openURLSeeds are URLs of every scheme, nested migrate URLs and host
// lists, good and bad: the starting points of FuzzOpenURL.
var openURLSeeds = []string{
	"singleredis://app:s3cretpass@127.0.0.1:6380/2?ttl=10s&prefix=app:&fence=true&fair_wait=true&client=rueidis",
	"singleredis://127.0.0.1:1?client=redigo&dial_timeout=1s&require=fencing",
	"singleredis://h:1/16",
	"singlerediss://u:s3cretpass@h:6379?tls_insecure=true",
	"redlock://h1:6379,h2:6379,h3:6379?ttl=10s&drift=0.01&restart_safety=true&max_ttl=1m",
	"redlock://h1:6379, h2:6379,h3:6379?fence=true&failovers=1",
	"redlock://h1:1,h1:1,h2:1?max_ttl=2562047h",
	"legacysetnx://h:6379?prefix=lock.&unit=ms&server_time=true&redis_expiry=true",
	"legacysetnx://h:1?unit=s&ttl=500ms",
	"etcd://u:s3cretpass@h1:2379,h2:2379?prefix=/locks/&ttl=10s&require=fencing,failover",
	"etcds://u:p@h1:2379?ttl=500ms",
	"memlock://?ttl=1s",
	"migrate://?phase=dual&legacy=legacysetnx%3A%2F%2Fh%3A1%3Funit%3Ds&target=singleredis%3A%2F%2Fu%3As3cretpass%40h%3A1",
	"migrate://?phase=target&legacy=migrate%3A%2F%2F%3Fphase%3Ddual&target=redlock%3A%2F%2Fa%3A1%2Cb%3A1%2Cc%3A1",
	"migrate://?phase=halfway&legacy=",
	"nosuch://h:1",
	"://app:pass@",
	"singleredis://[::1]:6379,h:0?ttl=-1s",
}

// FuzzOpenURL: whatever the URL, OpenURL with a context that has already
// ended does not panic and returns either a Locker (then closed) or an
// error that matches exactly one of lockswap's sentinels; an outage
// (ErrUnavailable) only alongside the context's error, since nothing was
// dialled; and no password of the URL (its user information, a nested
// URL's) in the error or in the Locker's String. The seeds run with go
// test; run longer with
//
//	go test -run '^$' -fuzz FuzzOpenURL -fuzztime 5m ./backend/
func FuzzOpenURL(f *testing.F) {
	for _, s := range openURLSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		checkOpenURL(t, raw)
	})
}

// TestOpenURLMutated runs the checks of FuzzOpenURL on 3,000 URLs made
// from the seeds by a fixed pseudo-random sequence of edits (parts of
// other seeds spliced in, characters deleted, URLs nested in migrate
// URLs), the same inputs every run, so that CI explores more than the
// seeds in a few seconds.
func TestOpenURLMutated(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	odd := []string{"", "%", "%zz", "@", ":", "://", "?", "&", "=", ",", ", ", "[", "]", "/", "#", "\x00", "é", "\u023a", "\u212a", "\xff",
		"ttl=", "require=", "client=", "password=", "fence=true", "max_ttl=1ns", "h:99999", strings.Repeat("k", 3000)}
	for range 3000 {
		s := openURLSeeds[r.IntN(len(openURLSeeds))]
		for range 1 + r.IntN(3) {
			at := r.IntN(len(s) + 1)
			switch r.IntN(4) {
			case 0:
				s = s[:at] + odd[r.IntN(len(odd))] + s[at:]
			case 1:
				o := openURLSeeds[r.IntN(len(openURLSeeds))]
				from := r.IntN(len(o))
				s = s[:at] + o[from:from+r.IntN(len(o)-from)] + s[at:]
			case 2:
				if at < len(s) {
					s = s[:at] + s[at+1+r.IntN(min(8, len(s)-at)):]
				}
			case 3:
				s = "migrate://?phase=dual&legacy=" + url.QueryEscape(s) + "&target=" + url.QueryEscape(openURLSeeds[r.IntN(len(openURLSeeds))])
			}
		}
		checkOpenURL(t, s)
	}
}

// openMarker stands for a password: it cannot be in a message by chance.
const openMarker = "Zq7OpenSecret"

// urlPasswords find the password in a URL's user information: of the URL
// itself, and of a URL nested in it (percent-encoded). The password is
// their second group.
var urlPasswords = []*regexp.Regexp{
	regexp.MustCompile(`://([^/?#@:]*):([^/?#@]*)@`),
	regexp.MustCompile(`(?i)%3A%2F%2F((?:[^/?#@%]|%[0-9A-F]{2})*?)%3A((?:[^/?#@%]|%[0-9A-F]{2})*?)%40`),
}

// checkOpenURL checks OpenURL(raw) as FuzzOpenURL promises, with every
// password in raw replaced by openMarker first.
func checkOpenURL(t *testing.T, raw string) {
	t.Helper()
	if strings.Contains(raw, openMarker) {
		return
	}
	for _, re := range urlPasswords {
		raw = re.ReplaceAllStringFunc(raw, func(m string) string {
			sub := re.FindStringSubmatchIndex(m)
			return m[:sub[4]] + openMarker + m[sub[5]:]
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var (
		lk  lockswap.Locker
		err error
	)
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("OpenURL(%q) panicked: %v", raw, p)
			}
		}()
		lk, err = backend.OpenURL(ctx, raw)
	}()
	if err == nil {
		if lk == nil {
			t.Fatalf("OpenURL(%q): no Locker and no error", raw)
		}
		if s := fmt.Sprint(lk); strings.Contains(s, openMarker) {
			t.Errorf("OpenURL(%q): the Locker's String shows the password: %s", raw, s)
		}
		if err := lk.Close(); err != nil {
			t.Errorf("OpenURL(%q): Close: %v", raw, err)
		}
		return
	}
	if strings.Contains(err.Error(), openMarker) {
		t.Fatalf("OpenURL(%q): the error shows the password: %v", raw, err)
	}
	var matched []error
	for _, s := range []error{lockswap.ErrInvalid, lockswap.ErrUnavailable, lockswap.ErrHeld, lockswap.ErrLost, lockswap.ErrClosed} {
		if errors.Is(err, s) {
			matched = append(matched, s)
		}
	}
	switch {
	case len(matched) != 1:
		t.Fatalf("OpenURL(%q) = %v: matches %d sentinels %v, want exactly one", raw, err, len(matched), matched)
	case matched[0] == lockswap.ErrUnavailable && !errors.Is(err, context.Canceled):
		t.Fatalf("OpenURL(%q) = %v: an outage, but nothing was dialled (the context had ended) and the error does not match context.Canceled", raw, err)
	case matched[0] != lockswap.ErrInvalid && matched[0] != lockswap.ErrUnavailable:
		t.Fatalf("OpenURL(%q) = %v: want ErrInvalid, or ErrUnavailable with the context's error", raw, err)
	}
}

package securitytest

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/backend"
	"github.com/lockswap/lockswap/internal/testserver"
)

// TestACLMissingRight: an ACL user that lacks one command or key pattern
// its backend needs gets an ErrInvalid error that names the permission
// problem, from the first call that needs it: NOPERM is a configuration error, so
// Acquire neither retries nor waits for its deadline.
func TestACLMissingRight(t *testing.T) {
	byName := map[string]aclCase{}
	for _, c := range aclCases {
		byName[c.name] = c
	}
	for _, m := range []struct {
		backend, drop string
	}{
		{"singleredis", "+set"},
		{"singleredis", "+eval +evalsha"},
		{"singleredis-fence", "~{app:*}:fence"},
		{"singleredis-fence", "+time"},
		{"singleredis-fair-wait", "~{app:*}:fairq"},
		{"singleredis-fair-wait", "+exists"},
		{"singleredis-fair-wait", "&app:lockswap:fairwait:*"},
		{"singleredis-fair-wait", "+subscribe"},
		{"singleredis-semaphore", "+hgetall"},
		{"singleredis-semaphore", "+hset"},
		{"singleredis-semaphore", "+time"},
		{"singleredis-semaphore-fence", "~{app:*}:fence"},
		{"singleredis-semaphore-fence", "+set"},
		{"singleredis-rwlock", "+hgetall"},
		{"singleredis-rwlock", "+hset"},
		{"singleredis-rwlock-fence", "+set"},
		{"redlock", "+set"},
		{"redlock-fence", "~{app:*}:fence"},
		{"redlock-fence", "+time"},
		{"redlock-restart-safety", "~lockswap:redlock:epoch"},
		{"redlock-restart-safety", "+time"},
		{"legacysetnx", "+get"},
		{"legacysetnx", "+eval +evalsha"},
		{"legacysetnx-server-time", "+time"},
	} {
		c := byName[m.backend]
		rule := c.rule()
		for _, w := range strings.Fields(m.drop) {
			if !strings.Contains(rule, " "+w) {
				t.Fatalf("%s rules have no %s", c.name, w)
			}
			rule = strings.Replace(rule, " "+w, "", 1)
		}
		for _, client := range redisClients {
			t.Run(c.name+"/without "+m.drop+"/"+client, func(t *testing.T) {
				srvs := startTLS(t, c.servers, testserver.RedisTLSOptions{CA: testserver.CAT(t, "x"), Users: []string{rule}})
				lk, err := backend.OpenURL(context.Background(), c.url(addrs(srvs, false), client, ""))
				if err != nil {
					t.Fatal(err)
				}
				defer lk.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				// Acquire, extend and release: some rights are needed by
				// only one of them (singleredis takes a lock without a
				// script).
				l, err := lk.Acquire(ctx, "job", c.lockOptions(5*time.Second)...)
				if err == nil {
					if err = l.Extend(ctx, 5*time.Second); err == nil {
						err = l.Release(ctx)
					}
				}
				if err == nil {
					t.Fatalf("a user without %s took, extended and released a lock: the documented rights are not all needed", m.drop)
				}
				if ctx.Err() != nil {
					t.Fatalf("the permission error came only at the deadline: %v", err)
				}
				if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "permission") {
					t.Fatalf("err = %v, want ErrInvalid naming the missing permission", err)
				}
			})
		}
	}
}

// TestRedisWrongPassword: a wrong password, for an ACL user and for the
// default user (requirepass), is ErrInvalid on the first attempt, and the
// password (right or wrong) is in no error.
func TestRedisWrongPassword(t *testing.T) {
	ca := testserver.CAT(t, "auth")
	c := aclCases[0]
	srv := startTLS(t, 1, testserver.RedisTLSOptions{CA: ca, Users: []string{c.rule()}})[0]
	// The default user gets a password last: the harness's own
	// connections (readiness, ACL SETUSER) use it without one.
	if err := srv.SetUser("default on >" + aclPassword); err != nil {
		t.Fatal(err)
	}
	tlsCA := "&tls_ca=" + url.QueryEscape(ca.CertFile)
	for _, client := range redisClients {
		for _, u := range []struct{ name, raw string }{
			{"acl-user", "singleredis://locker:wrong-" + url.PathEscape(aclPassword) + "@" + srv.Addr() + "?prefix=app:&client=" + client},
			{"requirepass", "singleredis://:wrong-" + url.PathEscape(aclPassword) + "@" + srv.Addr() + "?prefix=app:&client=" + client},
			{"acl-user-tls", "singlerediss://locker:wrong-" + url.PathEscape(aclPassword) + "@" + srv.TLSAddr() + "?prefix=app:&client=" + client + tlsCA},
		} {
			t.Run(client+"/"+u.name, func(t *testing.T) {
				lk, err := backend.OpenURL(context.Background(), u.raw)
				if err == nil {
					defer lk.Close()
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					_, err = lk.Acquire(ctx, "job", lockswap.WithTTL(5*time.Second))
					if ctx.Err() != nil {
						t.Fatalf("the authentication error came only at the deadline: %v", err)
					}
				}
				if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "authentication") {
					t.Fatalf("err = %v, want ErrInvalid saying authentication failed", err)
				}
				for _, f := range []string{"%v", "%+v"} {
					if s := fmtErr(f, err); strings.Contains(s, aclPassword) {
						t.Errorf("%s of the error shows the password: %s", f, s)
					}
				}
			})
		}
	}
	// The right password for the default user works (the URL form
	// without a user name).
	lockOnce(t, open(t, "singleredis://:"+url.PathEscape(aclPassword)+"@"+srv.Addr()+"?prefix=app:"), nil)
}

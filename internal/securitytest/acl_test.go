package securitytest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/backend"
	"github.com/lockswap/lockswap/conformance"
	"github.com/lockswap/lockswap/internal/logtest"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redisclient/goredis"
	"github.com/lockswap/lockswap/redlock"
	"github.com/lockswap/lockswap/singleredis"
)

// aclPrefix is the key prefix of the least-privilege rules, as in
// docs/security.md.
const aclPrefix = "app:"

// aclPassword is the ACL user's password in the tests; docs/security.md
// writes it as PASSWORD.
const aclPassword = "s3cret-Acl-Pw"

// aclCase is one Redis backend configuration with the ACL rules it needs,
// exactly as docs/security.md lists them (with PASSWORD for the password).
type aclCase struct {
	name    string
	scheme  string
	servers int
	params  string
	ttl     time.Duration
	rules   string
	// permits, when above 0, makes the case one of counting semaphores:
	// its locks are permits of that limit (lockswap.WithPermits), and
	// its suite the semaphore suite.
	permits int
	// rw makes the case one of read-write locks: its locks are read
	// holds (lockswap.WithRead), and its suite the read-write suite.
	rw bool
}

var aclCases = []aclCase{
	{"singleredis", "singleredis", 1, "", time.Second,
		"locker on >PASSWORD resetkeys resetchannels ~app:* -@all +set +get +del +pexpire +type +eval +evalsha", 0, false},
	{"singleredis-fence", "singleredis", 1, "fence=true", time.Second,
		"locker on >PASSWORD resetkeys resetchannels ~app:* ~{app:*}:fence -@all +set +get +del +pexpire +type +exists +time +eval +evalsha", 0, false},
	{"singleredis-fair-wait", "singleredis", 1, "fair_wait=true", time.Second,
		"locker on >PASSWORD resetkeys resetchannels ~app:* ~{app:*}:fairq ~{app:*}:fairw &app:lockswap:fairwait:* -@all +set +get +del +pexpire +type +exists +time +pttl +lindex +lpop +rpush +hget +hset +hdel +hexists +hlen +publish +subscribe +eval +evalsha", 0, false},
	{"singleredis-fair-wait-fence", "singleredis", 1, "fair_wait=true&fence=true", time.Second,
		"locker on >PASSWORD resetkeys resetchannels ~app:* ~{app:*}:fairq ~{app:*}:fairw ~{app:*}:fence &app:lockswap:fairwait:* -@all +set +get +del +pexpire +type +exists +time +pttl +lindex +lpop +rpush +hget +hset +hdel +hexists +hlen +publish +subscribe +eval +evalsha", 0, false},
	{"redlock", "redlock", 3, "", time.Second,
		"locker on >PASSWORD resetkeys resetchannels ~app:* -@all +set +get +del +pexpire +type +eval +evalsha", 0, false},
	{"redlock-restart-safety", "redlock", 3, "restart_safety=true&max_ttl=30s", time.Second,
		"locker on >PASSWORD resetkeys resetchannels ~app:* ~lockswap:redlock:epoch -@all +set +get +del +pexpire +type +time +eval +evalsha", 0, false},
	{"redlock-fence", "redlock", 3, "fence=true", time.Second,
		"locker on >PASSWORD resetkeys resetchannels ~app:* ~{app:*}:fence ~lockswap:redlock:members -@all +set +get +del +pexpire +type +time +hgetall +hset +hdel +pexpireat +eval +evalsha", 0, false},
	{"redlock-fence-restart-safety", "redlock", 3, "fence=true&restart_safety=true&max_ttl=30s", time.Second,
		"locker on >PASSWORD resetkeys resetchannels ~app:* ~{app:*}:fence ~lockswap:redlock:epoch ~lockswap:redlock:members -@all +set +get +del +pexpire +type +time +hgetall +hset +hdel +pexpireat +eval +evalsha", 0, false},
	{"singleredis-semaphore", "singleredis", 1, "", time.Second,
		"locker on >PASSWORD resetkeys resetchannels ~app:* -@all +set +get +del +pexpire +type +time +hgetall +hset +hdel +eval +evalsha", 3, false},
	{"singleredis-semaphore-fence", "singleredis", 1, "fence=true", time.Second,
		"locker on >PASSWORD resetkeys resetchannels ~app:* ~{app:*}:fence -@all +set +get +del +pexpire +type +exists +time +hgetall +hset +hdel +eval +evalsha", 3, false},
	// Permits with fair_wait: the fair wait's rules and +hgetall.
	{"singleredis-semaphore-fair-wait-fence", "singleredis", 1, "fair_wait=true&fence=true", time.Second,
		"locker on >PASSWORD resetkeys resetchannels ~app:* ~{app:*}:fairq ~{app:*}:fairw ~{app:*}:fence &app:lockswap:fairwait:* -@all +set +get +del +pexpire +type +exists +time +pttl +lindex +lpop +rpush +hget +hset +hdel +hexists +hlen +hgetall +publish +subscribe +eval +evalsha", 3, false},
	// Read-write locks need the semaphores' rules.
	{"singleredis-rwlock", "singleredis", 1, "", time.Second,
		"locker on >PASSWORD resetkeys resetchannels ~app:* -@all +set +get +del +pexpire +type +time +hgetall +hset +hdel +eval +evalsha", 0, true},
	{"singleredis-rwlock-fence", "singleredis", 1, "fence=true", time.Second,
		"locker on >PASSWORD resetkeys resetchannels ~app:* ~{app:*}:fence -@all +set +get +del +pexpire +type +exists +time +hgetall +hset +hdel +eval +evalsha", 0, true},
	{"legacysetnx", "legacysetnx", 1, "unit=ms", time.Second,
		"locker on >PASSWORD resetkeys resetchannels ~app:* -@all +get +set +del +eval +evalsha", 0, false},
	{"legacysetnx-server-time", "legacysetnx", 1, "unit=ms&server_time=true&redis_expiry=true", time.Second,
		"locker on >PASSWORD resetkeys resetchannels ~app:* -@all +get +set +del +time +eval +evalsha", 0, false},
}

// lockOptions are the options of a lock of the case: a TTL, the permits
// of a semaphore case, a read hold of a read-write case.
func (c aclCase) lockOptions(ttl time.Duration) []lockswap.Option {
	o := []lockswap.Option{lockswap.WithTTL(ttl)}
	if c.permits > 0 {
		o = append(o, lockswap.WithPermits(c.permits))
	}
	if c.rw {
		o = append(o, lockswap.WithRead())
	}
	return o
}

func (c aclCase) rule() string { return strings.Replace(c.rules, "PASSWORD", aclPassword, 1) }

// url is the backend URL for the user locker on addrs.
func (c aclCase) url(addrs []string, client, extra string) string {
	return c.scheme + "://locker:" + url.PathEscape(aclPassword) + "@" + strings.Join(addrs, ",") +
		"?prefix=" + url.QueryEscape(aclPrefix) + "&client=" + client + "&" + c.params + extra
}

func addrs(srvs []*testserver.RedisTLS, tls bool) []string {
	out := make([]string, len(srvs))
	for i, s := range srvs {
		if tls {
			out[i] = s.TLSAddr()
		} else {
			out[i] = s.Addr()
		}
	}
	return out
}

// TestACLRulesDocumented: the rules the tests grant are the ones
// docs/security.md tells users to paste.
func TestACLRulesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range aclCases {
		if !strings.Contains(string(doc), "ACL SETUSER "+c.rules) {
			t.Errorf("docs/security.md lacks the rules of %s: ACL SETUSER %s", c.name, c.rules)
		}
	}
}

// TestACLConformance runs the conformance suite for each Redis backend
// configuration as an ACL user that has exactly the documented rights:
// the commands (those its scripts run included) and the key patterns.
// The base singleredis configurations (and those with fair_wait, whose
// Pub/Sub connection is another) run over TLS as well, so the suite also
// runs over TLS; the others over plain TCP, with a shorter TTL (TLS is
// what needs the longer one), to keep the test's time down.
func TestACLConformance(t *testing.T) {
	ca := testserver.CAT(t, "acl")
	for _, c := range aclCases {
		t.Run(c.name, func(t *testing.T) {
			srvs := startTLS(t, c.servers, testserver.RedisTLSOptions{CA: ca, Users: []string{c.rule()}})
			seedEpochs(t, srvs)
			tls := c.name == "singleredis" || c.name == "singleredis-fair-wait" || c.name == "singleredis-fair-wait-fence"
			as := addrs(srvs, tls)
			extra, ttl := "", c.ttl
			if tls {
				// A request that needs a new connection carries a TLS
				// handshake; under -race on a loaded machine that took
				// over a second.
				ttl = 2 * time.Second
				c.scheme += "s"
				extra = "&tls_ca=" + url.QueryEscape(ca.CertFile)
			}
			run := conformance.Run
			if c.permits > 0 {
				run = conformance.RunSemaphore
			}
			if c.rw {
				run = conformance.RunReadWrite
			}
			run(t, conformance.Harness{
				NewLocker: func(t *testing.T) lockswap.Locker {
					if c.scheme == "redlock" {
						return aclRedlock(t, as, c.params)
					}
					lk, err := backend.OpenURL(context.Background(), c.url(as, "goredis", extra))
					if err != nil {
						t.Fatal(err)
					}
					return lk
				},
				TTL: ttl,
			})
		})
	}
}

// TestACLEveryClient takes, extends and releases a lock as the ACL user
// with each Redis client: the clients' own connection set-up (HELLO,
// AUTH, CLIENT SETINFO) needs no further rights.
func TestACLEveryClient(t *testing.T) {
	ca := testserver.CAT(t, "acl")
	for _, c := range aclCases {
		srvs := startTLS(t, c.servers, testserver.RedisTLSOptions{CA: ca, Users: []string{c.rule()}})
		seedEpochs(t, srvs)
		for _, client := range redisClients {
			t.Run(c.name+"/"+client, func(t *testing.T) {
				lk, err := backend.OpenURL(context.Background(), c.url(addrs(srvs, false), client, ""))
				if err != nil {
					t.Fatal(err)
				}
				defer lk.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				l, err := lk.Acquire(ctx, "job", c.lockOptions(5*time.Second)...)
				if err != nil {
					t.Fatalf("Acquire: %v", err)
				}
				if err := l.Extend(ctx, 5*time.Second); err != nil {
					t.Fatalf("Extend: %v", err)
				}
				if err := l.Release(ctx); err != nil {
					t.Fatalf("Release: %v", err)
				}
				if c.scheme == "redlock" && strings.Contains(c.params, "fence=true") {
					// The rights cover the membership round: the Locker
					// registered its masters.
					for _, s := range srvs {
						if n := redistest.GoRedisClient(t, s.Addr()).Exists(ctx, redlock.MembersKey).Val(); n != 1 {
							t.Fatalf("%s holds no %s: the documented rights do not let the Locker register its masters", s.Addr(), redlock.MembersKey)
						}
					}
				}
			})
		}
	}
}

// seedEpochs writes, as the default user, a Redlock epoch a minute old on
// each server, as if lockswap had been running there for that long: a
// new epoch would keep restart_safety from counting the instance's votes
// for max_ttl (30 s) first, which is what it is for, but not what these
// tests are about.
func seedEpochs(t *testing.T, srvs []*testserver.RedisTLS) {
	t.Helper()
	ctx := context.Background()
	for _, s := range srvs {
		rdb := redistest.GoRedisClient(t, s.Addr())
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		epoch := fmt.Sprintf("%d.%d.seed", now.Add(-time.Minute).Unix(), 0)
		if err := rdb.Set(ctx, redlock.EpochKey, epoch, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// aclRedlock is a Redlock as the user locker with go-redis clients, built
// with redlock.New rather than a URL: URLs have no parameter for the
// per-instance timeout, and its default for the suite's 1 s TTL (10 ms)
// is too short for a loaded test machine, as in redlock's own suite.
// params are the case's URL parameters: fence=true and
// restart_safety=true (with max_ttl=30s) are honoured.
func aclRedlock(t *testing.T, addrs []string, params string) lockswap.Locker {
	cs := make([]redisclient.Client, len(addrs))
	for i, a := range addrs {
		rdb := redis.NewClient(&redis.Options{Addr: a, Username: "locker", Password: aclPassword,
			ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { rdb.Close() })
		cs[i] = goredis.New(rdb)
	}
	o := redlock.Options{Prefix: aclPrefix, InstanceTimeout: 250 * time.Millisecond}
	q, err := url.ParseQuery(params)
	if err != nil {
		t.Fatal(err)
	}
	if q.Get("restart_safety") == "true" {
		o.RestartSafety, o.MaxTTL = true, 30*time.Second
	}
	o.Fence = q.Get("fence") == "true"
	lk, err := redlock.New(cs, o)
	if err != nil {
		t.Fatal(err)
	}
	return lk
}

// TestACLFairWaitWithoutPublish: with fair_wait=true and a user whose ACL
// lacks PUBLISH (the wake-up), a release that hands the key to a waiter
// still succeeds (the key was handed over; the script does not fail
// halfway), logs singleredis.MsgWakeRefused, and the waiter takes the key
// at its next check instead of being woken.
func TestACLFairWaitWithoutPublish(t *testing.T) {
	var rules string
	for _, c := range aclCases {
		if c.name == "singleredis-fair-wait" {
			rules = strings.Replace(c.rule(), " +publish", "", 1)
		}
	}
	if rules == "" || strings.Contains(rules, "publish") {
		t.Fatalf("no fair-wait ACL case to take +publish from: %q", rules)
	}
	srv := startTLS(t, 1, testserver.RedisTLSOptions{CA: testserver.CAT(t, "acl"), Users: []string{rules}})[0]
	rec := logtest.New()
	newLocker := func() lockswap.Locker {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "locker", Password: aclPassword, MaxRetries: -1})
		t.Cleanup(func() { rdb.Close() })
		lk, err := singleredis.New(goredis.New(rdb), singleredis.Options{Prefix: aclPrefix, FairWait: true, Logger: rec.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lk.Close() })
		return lk
	}
	holder, waiter := newLocker(), newLocker()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const ttl = time.Second
	l, err := holder.Acquire(ctx, "job", lockswap.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		wl, err := waiter.Acquire(ctx, "job", lockswap.WithTTL(ttl))
		if err == nil {
			err = wl.Release(ctx)
		}
		got <- err
	}()
	// Wait (bounded) until the waiter is in the queue.
	raw := redistest.GoRedisClient(t, srv.Addr())
	for raw.LLen(ctx, singleredis.FairQueueKey(aclPrefix+"job")).Val() == 0 {
		if ctx.Err() != nil {
			t.Fatal("the waiter never joined the queue")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release that handed the key over without PUBLISH: %v, want success", err)
	}
	rec.Wait(t, singleredis.MsgWakeRefused, 5*time.Second)
	if err := <-got; err != nil {
		t.Fatalf("the waiter, not woken, did not take the key at its next check: %v", err)
	}
}

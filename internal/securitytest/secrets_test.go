package securitytest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/backend"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/registry"
)

// shown collects everything a user may see: error texts, String() and
// %v/%+v renderings, and log output.
type shown struct {
	mu    sync.Mutex
	texts []string
}

func (s *shown) add(what string, v any) {
	if v == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	formats := []string{"%v", "%+v", "%s", "%#v"}
	if _, ok := v.(error); ok {
		// %#v of an error prints its Go structure (and of an error from
		// a client library, that library's internals): not what a user
		// is shown.
		formats = formats[:3]
	}
	for _, f := range formats {
		s.texts = append(s.texts, what+" "+f+": "+fmt.Sprintf(f, v))
	}
}

// check fails the test for each text that contains one of the secrets.
func (s *shown) check(t *testing.T, secrets ...string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.texts) == 0 {
		t.Fatal("nothing collected")
	}
	for _, txt := range s.texts {
		for _, sec := range secrets {
			if strings.Contains(txt, sec) {
				t.Errorf("a password is shown: %s", txt)
			}
		}
	}
}

// syncBuffer is a bytes.Buffer for a slog handler used from several
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// exercise parses raw every way a user can, opens it with a logger, takes,
// extends and releases a lock (with a short deadline: some of the URLs
// are meant to fail), then, with stop, takes a lock, stops the server
// under it and tries to extend and release, so that the Locker reports and
// logs a lost lock and failed requests. Everything shown goes to s.
func exercise(t *testing.T, s *shown, logs *syncBuffer, raw string, stop func()) {
	t.Helper()
	if cfg, err := backend.ParseURL(raw); err != nil {
		s.add("backend.ParseURL error", err)
	} else {
		s.add("Config", cfg)
		s.add("Config.String", cfg.String())
		s.add("Config.Validate error", cfg.Validate())
	}
	if u, err := registry.ParseURL(raw); err != nil {
		s.add("registry.ParseURL error", err)
	} else {
		s.add("URL", u)
		s.add("URL.String", u.String())
	}
	cfg, err := backend.ParseURL(raw)
	if err != nil {
		return
	}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lk, err := backend.Open(ctx, cfg, backend.Clients{Logger: logger})
	s.add("Open error", err)
	if err != nil {
		return
	}
	defer func() { s.add("Close error", lk.Close()) }()
	s.add("Locker", lk)
	if str, ok := lk.(fmt.Stringer); ok {
		s.add("Locker.String", str.String())
	}
	actx, acancel := context.WithTimeout(ctx, 3*time.Second)
	defer acancel()
	l, err := lk.Acquire(actx, "job", lockswap.WithTTL(5*time.Second), lockswap.WithMaxOutage(time.Second))
	s.add("Acquire error", err)
	if err != nil {
		return
	}
	s.add("Lock", l)
	s.add("Extend error", l.Extend(ctx, 5*time.Second))
	s.add("Release error", l.Release(ctx))
	if stop == nil {
		return
	}
	l, err = lk.Acquire(actx, "job2", lockswap.WithTTL(2*time.Second))
	s.add("Acquire error", err)
	if err != nil {
		return
	}
	stop()
	s.add("Extend error after stop", l.Extend(ctx, 2*time.Second))
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Error("lock not lost 10 s after its server stopped")
	}
	s.add("Release error after stop", l.Release(ctx))
	_, err = lk.TryAcquire(ctx, "job3")
	s.add("TryAcquire error after stop", err)
}

// TestSecretsNeverShown: for URLs with passwords (Redis AUTH of the
// default user, a Redis ACL user over TLS, an etcd user), the password
// appears in no error text (%v, %+v), in no String() or %v/%+v of a URL,
// Config, Locker or Lock, and in nothing a Locker logs, whether the
// password is right, wrong, or the server is down or stops under a held
// lock. (Traces and metrics: the otel module's tests.)
func TestSecretsNeverShown(t *testing.T) {
	ca := testserver.CAT(t, "secrets")
	caParam := "&tls_ca=" + url.QueryEscape(ca.CertFile)
	var s shown
	logs := &syncBuffer{}
	wrong := "wrong-" + aclPassword
	pe := url.PathEscape

	// Redis: an ACL user (over TLS) and the default user's password.
	newRedis := func() *testserver.RedisTLS {
		srv := startTLS(t, 1, testserver.RedisTLSOptions{CA: ca, Users: []string{aclCases[1].rule()}})[0]
		if err := srv.SetUser("default on >" + aclPassword); err != nil {
			t.Fatal(err)
		}
		return srv
	}
	for _, client := range redisClients {
		srv := newRedis()
		acl := func(pw string) string {
			return "singlerediss://locker:" + pe(pw) + "@" + srv.TLSAddr() + "?prefix=app:&fence=true&client=" + client + caParam
		}
		def := func(pw string) string {
			return "singleredis://:" + pe(pw) + "@" + srv.Addr() + "?prefix=app:&client=" + client
		}
		exercise(t, &s, logs, acl(aclPassword), nil)
		exercise(t, &s, logs, def(aclPassword), nil)
		exercise(t, &s, logs, acl(wrong), nil)
		exercise(t, &s, logs, def(wrong), nil)
		// Bad URLs that carry a password.
		exercise(t, &s, logs, acl(aclPassword)+"&bogus=1", nil)
		exercise(t, &s, logs, "singleredis://locker:"+pe(aclPassword)+"@127.0.0.1:99999", nil)
		exercise(t, &s, logs, "singleredis://locker:"+pe(aclPassword)+"@127.0.0.1:6379?tls_ca=/nonexistent", nil)
		// Redlock and legacysetnx with a user.
		exercise(t, &s, logs, "redlocks://locker:"+pe(aclPassword)+"@"+srv.TLSAddr()+","+srv.TLSAddr()+","+srv.TLSAddr()+"?prefix=app:&client="+client+caParam, nil)
		exercise(t, &s, logs, "legacysetnxs://locker:"+pe(wrong)+"@"+srv.TLSAddr()+"?prefix=app:&unit=ms&client="+client+caParam, nil)
		// Nothing listening.
		exercise(t, &s, logs, "singleredis://locker:"+pe(aclPassword)+"@127.0.0.1:1?prefix=app:&client="+client, nil)
		// The server stops under a held lock.
		down := newRedis()
		exercise(t, &s, logs, "singleredis://locker:"+pe(aclPassword)+"@"+down.Addr()+"?prefix=app:&fence=true&client="+client, down.Stop)
	}

	// etcd: a user, over TLS; right and wrong password, server gone.
	newEtcd := func() (*testserver.Etcd, string) {
		e := testserver.EtcdTLST(t, testserver.EtcdTLSOptions{CA: ca, RootPassword: "root-" + etcdPassword,
			Users: []testserver.EtcdUser{{Name: "locker", Password: etcdPassword, Prefix: "/locks/"}}})
		return e, etcdHost(t, e)
	}
	_, host := newEtcd()
	etcd := func(pw, host string) string {
		return "etcds://locker:" + pe(pw) + "@" + host + "?prefix=/locks/&dial_timeout=2s" + caParam
	}
	exercise(t, &s, logs, etcd(etcdPassword, host), nil)
	exercise(t, &s, logs, etcd("wrong-"+etcdPassword, host), nil)
	exercise(t, &s, logs, etcd(etcdPassword, host)+"&bogus=1", nil)
	exercise(t, &s, logs, etcd(etcdPassword, "127.0.0.1:1"), nil)
	e, host := newEtcd()
	exercise(t, &s, logs, etcd(etcdPassword, host), e.Close)

	s.add("log output", logs.String())
	for _, msg := range []string{`msg="lock lost" backend=singleredis`, `msg="release failed" backend=singleredis`, `msg="lock lost" backend=etcdlease`} {
		if !strings.Contains(logs.String(), msg) {
			t.Errorf("the Lockers did not log %s: the log check checks less than it should", msg)
		}
	}
	t.Logf("%d texts checked, %d log lines", len(s.texts), strings.Count(logs.String(), "\n"))
	s.check(t, aclPassword, etcdPassword)
}

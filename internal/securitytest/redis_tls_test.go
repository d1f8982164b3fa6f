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
	"github.com/lockswap/lockswap/registry"
)

var redisClients = []string{"goredis", "redigo", "rueidis"}

// tlsScheme is one Redis backend's TLS URL for a set of servers.
type tlsScheme struct {
	name    string
	servers int
	params  string // the backend's own parameters
}

var tlsSchemes = []tlsScheme{
	{"singlerediss", 1, "fence=true"},
	{"redlocks", 3, "drift=0.01"},
	{"legacysetnxs", 1, "unit=ms"},
}

// tlsURL is the URL of scheme s over the TLS ports of srvs, with extra
// parameters.
func tlsURL(s tlsScheme, srvs []*testserver.RedisTLS, userinfo, params string) string {
	hosts := make([]string, len(srvs))
	for i, srv := range srvs {
		hosts[i] = srv.TLSAddr()
	}
	if userinfo != "" {
		userinfo += "@"
	}
	return s.name + "://" + userinfo + strings.Join(hosts, ",") + "?prefix=tls:&" + s.params + "&" + params
}

func startTLS(t *testing.T, n int, opts testserver.RedisTLSOptions) []*testserver.RedisTLS {
	t.Helper()
	srvs := make([]*testserver.RedisTLS, n)
	for i := range srvs {
		srvs[i] = testserver.RedisTLST(t, opts)
	}
	return srvs
}

// lockOnce takes and releases a lock through lk, and checks that a second
// Locker cannot take it meanwhile. Each Locker first takes and releases
// another key with Acquire, which retries: the first request on a new
// connection carries the TLS handshake, which under -race can take longer
// than even an instance's first timeout (redlock.InitialInstanceTimeout,
// within the TTL's budget), so a single TryAcquire on a cold pool may find
// no quorum.
func lockOnce(t *testing.T, lk, other lockswap.Locker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, x := range []lockswap.Locker{lk, other} {
		if x == nil {
			continue
		}
		w, err := x.Acquire(ctx, "warm", lockswap.WithTTL(30*time.Second))
		if err != nil {
			t.Fatalf("Acquire over TLS: %v", err)
		}
		if err := w.Release(ctx); err != nil {
			t.Fatalf("Release over TLS: %v", err)
		}
	}
	l, err := lk.TryAcquire(ctx, "job", lockswap.WithTTL(30*time.Second))
	if err != nil {
		t.Fatalf("TryAcquire over TLS: %v", err)
	}
	if other != nil {
		if _, err := other.TryAcquire(ctx, "job", lockswap.WithTTL(30*time.Second)); !errors.Is(err, lockswap.ErrHeld) {
			t.Fatalf("second Locker's TryAcquire of a held lock over TLS: err = %v, want ErrHeld", err)
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release over TLS: %v", err)
	}
}

func open(t *testing.T, raw string) lockswap.Locker {
	t.Helper()
	lk, err := backend.OpenURL(context.Background(), raw)
	if err != nil {
		t.Fatalf("OpenURL: %v", err)
	}
	t.Cleanup(func() { lk.Close() })
	return lk
}

// TestRedisTLSSchemes opens every Redis TLS scheme with every client
// through a URL that names the test CA (tls_ca=), takes and releases a
// lock, and checks a second Locker is kept out meanwhile.
func TestRedisTLSSchemes(t *testing.T) {
	ca := testserver.CAT(t, "good")
	srvs := startTLS(t, 3, testserver.RedisTLSOptions{CA: ca})
	for _, s := range tlsSchemes {
		for _, client := range redisClients {
			t.Run(s.name+"/"+client, func(t *testing.T) {
				raw := tlsURL(s, srvs[:s.servers], "", "client="+client+"&tls_ca="+url.QueryEscape(ca.CertFile))
				lockOnce(t, open(t, raw), open(t, raw))
			})
		}
	}
}

// TestRedisTLSClientCertificate: a server that requires client
// certificates is reached with tls_cert= and tls_key=, and refuses a
// client without one.
func TestRedisTLSClientCertificate(t *testing.T) {
	ca := testserver.CAT(t, "mtls")
	client, err := ca.Issue("client", false)
	if err != nil {
		t.Fatal(err)
	}
	srvs := startTLS(t, 1, testserver.RedisTLSOptions{CA: ca, AuthClients: true})
	s := tlsSchemes[0]
	for _, c := range redisClients {
		t.Run(c, func(t *testing.T) {
			ca := "client=" + c + "&tls_ca=" + url.QueryEscape(ca.CertFile)
			lockOnce(t, open(t, tlsURL(s, srvs, "", ca+"&tls_cert="+url.QueryEscape(client.CertFile)+"&tls_key="+url.QueryEscape(client.KeyFile))), nil)

			lk := open(t, tlsURL(s, srvs, "", ca))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := lk.TryAcquire(ctx, "job")
			if err == nil {
				t.Fatal("a server requiring client certificates let a client without one take a lock")
			}
			if ctx.Err() != nil {
				t.Fatalf("refused client certificate: the error came only at the deadline: %v", err)
			}
			t.Logf("without a client certificate: %v", err)
		})
	}
}

// TestRedisTLSWrongCA: a server whose certificate another CA signed is
// refused, at once and with an error that says it is a certificate
// problem and matches ErrInvalid (a configuration error, not an outage:
// waiting or retrying cannot fix it), by every scheme and client. The same
// holds with no tls_ca at all (the system roots do not know the test CA):
// verification is on by default.
func TestRedisTLSWrongCA(t *testing.T) {
	good := testserver.CAT(t, "good")
	other := testserver.CAT(t, "other")
	srvs := startTLS(t, 3, testserver.RedisTLSOptions{CA: good})
	for _, s := range tlsSchemes {
		for _, client := range redisClients {
			for _, ca := range []string{"&tls_ca=" + url.QueryEscape(other.CertFile), ""} {
				name := s.name + "/" + client + "/other-ca"
				if ca == "" {
					name = s.name + "/" + client + "/system-roots"
				}
				t.Run(name, func(t *testing.T) {
					lk := open(t, tlsURL(s, srvs[:s.servers], "", "client="+client+ca))
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					_, err := lk.Acquire(ctx, "job")
					if err == nil {
						t.Fatal("a server certificate from an unknown CA was accepted")
					}
					if ctx.Err() != nil {
						t.Fatalf("the certificate error came only at the deadline (waited as for an outage): %v", err)
					}
					if !errors.Is(err, lockswap.ErrInvalid) {
						t.Errorf("err = %v, want ErrInvalid (a configuration error)", err)
					}
					if !strings.Contains(err.Error(), "certificate") {
						t.Errorf("err = %v, want it to say it is a certificate problem", err)
					}
				})
			}
		}
	}
}

// TestTLSNeverSkipsVerification: the default TLS configuration verifies
// the server, and the URL parameters can only add trust (a CA), never
// turn verification off.
func TestTLSNeverSkipsVerification(t *testing.T) {
	if (registry.Clients{}).TLSConfig().InsecureSkipVerify {
		t.Fatal("the default TLS configuration skips verification")
	}
	ca := testserver.CAT(t, "c")
	u, err := registry.ParseURL("singlerediss://127.0.0.1:6379?tls_ca=" + url.QueryEscape(ca.CertFile))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := u.TLSConfig(registry.Clients{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.InsecureSkipVerify || cfg.RootCAs == nil {
		t.Fatalf("tls_ca gave InsecureSkipVerify=%v RootCAs=%v, want verification against the CA", cfg.InsecureSkipVerify, cfg.RootCAs)
	}
	for _, p := range []string{"insecure_skip_verify=true", "tls_insecure=true", "verify=false"} {
		if _, err := registry.ParseURL("singlerediss://127.0.0.1:6379?" + p); !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid (unknown parameter)", p, err)
		}
	}
}

// TestTLSParamsChecked: the TLS parameters are checked when the URL is
// parsed, with ErrInvalid errors naming the parameter.
func TestTLSParamsChecked(t *testing.T) {
	ca := testserver.CAT(t, "c")
	kp, err := ca.Issue("client", false)
	if err != nil {
		t.Fatal(err)
	}
	q := url.QueryEscape
	for _, c := range []struct{ raw, want string }{
		{"singlerediss://127.0.0.1:6379?tls_ca=/nonexistent/ca.pem", "tls_ca"},
		{"singlerediss://127.0.0.1:6379?tls_ca=" + q(kp.KeyFile), "tls_ca"}, // a key, not a certificate
		{"singlerediss://127.0.0.1:6379?tls_cert=" + q(kp.CertFile), "tls_key"},
		{"singlerediss://127.0.0.1:6379?tls_key=" + q(kp.KeyFile), "tls_cert"},
		{"singlerediss://127.0.0.1:6379?tls_cert=" + q(kp.CertFile) + "&tls_key=" + q(ca.CertFile), "tls_cert"},
		{"singleredis://127.0.0.1:6379?tls_ca=" + q(ca.CertFile), "TLS scheme"},
		{"etcd://127.0.0.1:2379?tls_ca=" + q(ca.CertFile), "TLS scheme"},
		{"etcds://127.0.0.1:2379?tls_ca=/nonexistent/ca.pem", "tls_ca"},
		{"redlocks://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3?tls_server_name=", "tls_server_name"},
	} {
		_, err := backend.ParseURL(c.raw)
		if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrInvalid naming %s", c.raw, err, c.want)
		}
	}
	cfg, err := backend.ParseURL("etcds://127.0.0.1:2379?tls_ca=" + q(ca.CertFile) + "&tls_cert=" + q(kp.CertFile) + "&tls_key=" + q(kp.KeyFile) + "&tls_server_name=localhost")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLSCA != ca.CertFile || cfg.TLSCert != kp.CertFile || cfg.TLSKey != kp.KeyFile || cfg.TLSServerName != "localhost" {
		t.Errorf("Config from URL = %+v, want the TLS files", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate of a parsed TLS config: %v", err)
	}
}

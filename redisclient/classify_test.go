package redisclient_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/internal/redisscript"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
)

// TestMaybeApplied: a request that could not connect never ran, so there
// is nothing to undo; one sent to a server that never answers may have
// run, so there is.
func TestMaybeApplied(t *testing.T) {
	// A server that accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for c := range accepted {
			c.Close()
		}
	})
	for _, c := range redistest.Clients {
		for _, tc := range []struct {
			name, addr string
			timeout    time.Duration
			want       bool
		}{
			// Nothing listens on port 1. The timeout leaves go-redis time
			// for its retries, so that the dial error is what it returns.
			{"closed port", "127.0.0.1:1", 10 * time.Second, false},
			{"silent server", ln.Addr().String(), 200 * time.Millisecond, true},
		} {
			cl := c.New(t, tc.addr)
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			_, err := cl.SetNXPX(ctx, "k", "token", time.Second)
			cancel()
			if err == nil {
				t.Fatalf("%s, %s: SET succeeded", c.Name, tc.name)
			}
			classified := redisclient.Classify(cl, err)
			if !redisclient.Uncertain(classified) {
				t.Errorf("%s, %s: Uncertain(%v) = false, want true: no answer came", c.Name, tc.name, classified)
			}
			if got := redisclient.MaybeApplied(classified); got != tc.want {
				t.Errorf("%s, %s: MaybeApplied(%v) = %v, want %v", c.Name, tc.name, classified, got, tc.want)
			}
		}
	}
}

// TestClassifyHeld: on a key the caller held, another Redis type means the
// lock is lost; any other error is classified as Classify does.
func TestClassifyHeld(t *testing.T) {
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	for _, c := range redistest.Clients {
		cl := c.New(t, srv.Addr())
		ctx := context.Background()
		if _, err := cl.Do(ctx, "RPUSH", "held-"+c.Name, "x"); err != nil {
			t.Fatal(err)
		}
		_, err := cl.Run(ctx, redisscript.CompareAndDelete, []string{"held-" + c.Name}, "token")
		if got := redisclient.ClassifyHeld(cl, err); !errors.Is(got, lockswap.ErrLost) || errors.Is(got, lockswap.ErrInvalid) {
			t.Errorf("%s: ClassifyHeld(%v) = %v, want ErrLost", c.Name, err, got)
		}
		if got := redisclient.Classify(cl, err); !errors.Is(got, lockswap.ErrInvalid) {
			t.Errorf("%s: Classify(%v) = %v, want ErrInvalid (a WRONGTYPE reply is permanent)", c.Name, err, got)
		}
		down := c.New(t, "127.0.0.1:1") // nothing listens on port 1
		_, err = down.Run(ctx, redisscript.CompareAndDelete, []string{"k"}, "token")
		if got := redisclient.ClassifyHeld(down, err); !errors.Is(got, lockswap.ErrUnavailable) || errors.Is(got, lockswap.ErrLost) {
			t.Errorf("%s: ClassifyHeld(%v) = %v, want ErrUnavailable", c.Name, err, got)
		}
		if got := redisclient.ClassifyHeld(cl, nil); got != nil {
			t.Errorf("%s: ClassifyHeld(nil) = %v", c.Name, got)
		}
	}
}

// TestPermissionReasons: a missing ACL right is reported as such, also
// when a script's own command was refused (Redis 7 wraps it as "ERR The
// user executing the script can't ..."): the user must learn to grant a
// right, not that a script is broken.
func TestPermissionReasons(t *testing.T) {
	for _, msg := range []string{
		"NOPERM this user has no permissions to run the 'set' command",
		"NOPERM this user has no permissions to access one of the keys used as arguments",
		"ERR The user executing the script can't run this command or subcommand script: 72b3804e, on @user_script:12.",
	} {
		r := redisclient.PermanentReason(&redisclient.ReplyError{Msg: msg})
		if !strings.Contains(r, "permission") {
			t.Errorf("PermanentReason(%q) = %q, want it to name a missing permission", msg, r)
		}
	}
}

// TestCertificateReason: a TLS certificate that did not verify is a
// permanent error with a reason that says so; other network errors are
// not.
func TestCertificateReason(t *testing.T) {
	verr := &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
	if r := redisclient.CertificateReason(fmt.Errorf("dial: %w", verr)); !strings.Contains(r, "certificate") {
		t.Errorf("CertificateReason(unknown authority) = %q, want a certificate reason", r)
	}
	alert := &net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}
	if !redisclient.IsPermanent(alert) {
		t.Error("a server refusing our client certificate is not permanent")
	}
	for _, err := range []error{
		errors.New("dial tcp: connection refused"),
		&net.OpError{Op: "dial", Err: errors.New("connection refused")},
		&net.OpError{Op: "remote error", Err: errors.New("tls: internal error")},
	} {
		if redisclient.IsPermanent(err) {
			t.Errorf("IsPermanent(%v) = true, want false", err)
		}
	}
}

package tlscheck

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestServerCertificate: a server whose certificate the configuration
// does not trust is an error with a Reason; a trusted one, and an address
// nothing listens on, are not (an outage is not a certificate's fault).
func TestServerCertificate(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	ctx := context.Background()

	err := ServerCertificate(ctx, addr, &tls.Config{}, 2*time.Second)
	if err == nil || !strings.Contains(Reason(err), "tls_ca=") {
		t.Errorf("untrusted certificate: err %v, reason %q; want an error whose reason names tls_ca=", err, Reason(err))
	}
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	if err := ServerCertificate(ctx, addr, &tls.Config{RootCAs: pool, ServerName: "example.com"}, 2*time.Second); err != nil {
		t.Errorf("trusted certificate: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	if err := ServerCertificate(ctx, closed, &tls.Config{}, 2*time.Second); err != nil {
		t.Errorf("nothing listening: %v, want nil", err)
	}
}

// TestReason: only certificate failures have a reason.
func TestReason(t *testing.T) {
	if r := Reason(errors.New("connection refused")); r != "" {
		t.Errorf("a network error has reason %q", r)
	}
	op := &net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}
	if r := Reason(op); !strings.Contains(r, "tls_cert=") {
		t.Errorf("a refused client certificate: reason %q", r)
	}
}

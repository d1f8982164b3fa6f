// Package tlscheck tells a TLS failure that configuration must fix (a
// certificate) from one that waiting may fix (a network failure), for the
// backends that connect over TLS.
package tlscheck

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"time"
)

// Reason returns, for an error of a TLS handshake that failed over a
// certificate, what to fix; "" for any other error. That is the server's
// certificate failing verification (signed by a CA the client does not
// trust, for another name, expired), or the server refusing the client's
// certificate or its lack of one (a TLS alert that names a certificate).
// No wait or retry fixes either: it is a configuration error (tls_ca=,
// tls_server_name=, tls_cert=/tls_key=).
func Reason(err error) string {
	var cv *tls.CertificateVerificationError
	if errors.As(err, &cv) {
		return "the server's TLS certificate did not verify: give the CA that signed it (tls_ca=) and a name it carries (tls_server_name=)"
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" && op.Err != nil && strings.Contains(op.Err.Error(), "certificate") {
		return "the server refused our TLS client certificate or its absence: give one its CA accepts (tls_cert=, tls_key=)"
	}
	return ""
}

// ServerCertificate connects to addr (host:port) and runs a TLS handshake
// with cfg (the server name defaults to addr's host), within timeout and
// ctx. It returns the handshake's error when the server's certificate did
// not verify ([Reason] says what to fix), and nil otherwise: a server that
// cannot be reached, or that answers, is not its business.
func ServerCertificate(ctx context.Context, addr string, cfg *tls.Config, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := tls.Dialer{Config: cfg}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		var cv *tls.CertificateVerificationError
		if errors.As(err, &cv) {
			return err
		}
		return nil
	}
	c.Close()
	return nil
}

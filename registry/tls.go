package registry

import (
	"crypto/tls"
	"crypto/x509"
	"os"
)

// TLSParams are the URL parameters that configure TLS, taken by every
// scheme with a TLS form (see [URL.TLSConfig]):
//
//	tls_ca=/path/ca.pem           CA certificates (PEM) to verify the server
//	                              with, instead of the system roots
//	tls_cert=/path/client.pem     client certificate (PEM), with tls_key
//	tls_key=/path/client-key.pem  its private key (PEM), with tls_cert
//	tls_server_name=name          the name the server's certificate must
//	                              carry, when it is not the host in the URL
//
// The server's certificate is always verified: no parameter turns
// verification off.
var TLSParams = []string{"tls_ca", "tls_cert", "tls_key", "tls_server_name"}

// TLSConfig returns the TLS configuration for u: nil when u's scheme is
// not a TLS one, else Clients.TLSConfig (c.TLS, or TLS 1.2 and the system
// roots) with the TLSParams applied on a copy. It reads the files the
// parameters name; an unreadable or malformed file, a tls_cert without
// tls_key (or the reverse), or a TLS parameter on a scheme without TLS
// gives an error matching lockswap.ErrInvalid that names the parameter
// and the file (never a key's content).
func (u *URL) TLSConfig(c Clients) (*tls.Config, error) {
	if !u.TLS {
		for _, p := range TLSParams {
			if _, ok := u.get(p); ok {
				return nil, invalid("parameter %s needs a TLS scheme (%ss://)", p, u.Scheme)
			}
		}
		return nil, nil
	}
	cfg := c.TLSConfig().Clone()
	if path, ok := u.get("tls_ca"); ok {
		pem, err := os.ReadFile(path)
		if err != nil {
			return nil, invalid("tls_ca=%s: cannot read the CA file: %v", path, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, invalid("tls_ca=%s: no PEM certificate in the file", path)
		}
		cfg.RootCAs = pool
	}
	certFile, hasCert := u.get("tls_cert")
	keyFile, hasKey := u.get("tls_key")
	switch {
	case hasCert != hasKey:
		return nil, invalid("tls_cert and tls_key go together: give both files of the client certificate or neither")
	case hasCert:
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			// The error of LoadX509KeyPair names the files or the
			// mismatch, never the key's bytes.
			return nil, invalid("tls_cert=%s, tls_key=%s: cannot load the client certificate: %v", certFile, keyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if name, ok := u.get("tls_server_name"); ok {
		if name == "" {
			return nil, invalid("tls_server_name is empty")
		}
		cfg.ServerName = name
	}
	return cfg, nil
}

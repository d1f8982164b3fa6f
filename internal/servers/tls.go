package servers

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// certValidity is how long test certificates are valid: long enough for a
// test run, short enough to be useless if one leaks.
const certValidity = 2 * time.Hour

// CA is a certificate authority made for one test run, with its key in
// memory and its certificate also written as PEM to a file.
type CA struct {
	// Cert is the CA's certificate.
	Cert *x509.Certificate
	// CertFile is the path of the CA certificate in PEM.
	CertFile string

	key *ecdsa.PrivateKey
	dir string
}

// KeyPair is a certificate issued by a CA and its private key, as PEM files.
type KeyPair struct {
	CertFile, KeyFile string
}

// NewCA makes a self-signed CA named name (an ECDSA P-256 key, valid for
// two hours) and writes its certificate under dir.
func NewCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("servers: CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"lockswap tests"}},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(certValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("servers: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("servers: CA certificate: %w", err)
	}
	ca := &CA{Cert: cert, key: key, dir: dir, CertFile: filepath.Join(dir, name+"-ca.pem")}
	if err := writePEM(ca.CertFile, "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return ca, nil
}

// Pool returns a cert pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issue makes a certificate named name signed by the CA and writes it and
// its key under the CA's directory. A server certificate is valid for the
// loopback addresses 127.0.0.1 and ::1 and the name "localhost"; a client
// certificate (server false) is for client authentication.
func (ca *CA) Issue(name string, server bool) (KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, fmt.Errorf("servers: key for %s: %w", name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name, Organization: []string{"lockswap tests"}},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		tmpl.DNSNames = []string{"localhost"}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("servers: certificate for %s: %w", name, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("servers: key for %s: %w", name, err)
	}
	kp := KeyPair{CertFile: filepath.Join(ca.dir, name+".pem"), KeyFile: filepath.Join(ca.dir, name+"-key.pem")}
	if err := writePEM(kp.CertFile, "CERTIFICATE", der); err != nil {
		return KeyPair{}, err
	}
	if err := writePEM(kp.KeyFile, "EC PRIVATE KEY", keyDER); err != nil {
		return KeyPair{}, err
	}
	return kp, nil
}

// TLSCertificate loads the key pair for a tls.Config.
func (kp KeyPair) TLSCertificate() (tls.Certificate, error) {
	return tls.LoadX509KeyPair(kp.CertFile, kp.KeyFile)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

func writePEM(path, typ string, der []byte) error {
	b := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("servers: write %s: %w", path, err)
	}
	return nil
}

// RedisTLSOptions configures a redis-server started by StartRedisTLS.
type RedisTLSOptions struct {
	// CA signs the server's certificate and, with AuthClients, is the CA
	// the server checks client certificates against.
	CA *CA
	// AuthClients makes the server require a client certificate signed by
	// CA (--tls-auth-clients yes); otherwise it asks for none.
	AuthClients bool
	// Users are ACL rules, one user each, as in an ACL file or after
	// "ACL SETUSER": "locker on >pw ~lock:* +get ...". They are applied
	// with ACL SETUSER once the server is up.
	Users []string
	// Redis are further options of the process (Args are appended after
	// the TLS arguments).
	Redis RedisOptions
}

// RedisTLS is a redis-server that also listens with TLS. The plain port
// of the embedded Redis (Addr) stays open on 127.0.0.1 so that the harness
// can check readiness and set users up; clients under test use TLSAddr.
type RedisTLS struct {
	*Redis
	// TLSPort is the port of the TLS listener.
	TLSPort int
	// Server is the server's certificate.
	Server KeyPair
}

// TLSAddr returns "127.0.0.1:port" of the TLS listener.
func (r *RedisTLS) TLSAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.TLSPort)) }

// StartRedisTLS starts redis-server with a TLS listener on a free port,
// serving a certificate for the loopback addresses signed by opts.CA, and
// applies opts.Users. Call Stop to stop it.
func StartRedisTLS(opts RedisTLSOptions) (*RedisTLS, error) {
	if opts.CA == nil {
		return nil, errors.New("servers: StartRedisTLS needs a CA")
	}
	kp, err := opts.CA.Issue("redis-server-"+strconv.FormatInt(serial().Int64()%1e6, 10), true)
	if err != nil {
		return nil, err
	}
	var last error
	for i := 0; i < 5; i++ {
		ports, err := FreePorts(1)
		if err != nil {
			return nil, err
		}
		auth := "no"
		if opts.AuthClients {
			auth = "yes"
		}
		ro := opts.Redis
		ro.Args = append([]string{
			"--tls-port", strconv.Itoa(ports[0]),
			"--tls-cert-file", kp.CertFile, "--tls-key-file", kp.KeyFile,
			"--tls-ca-cert-file", opts.CA.CertFile, "--tls-auth-clients", auth,
		}, opts.Redis.Args...)
		r, err := StartRedis(ro)
		if err != nil {
			last = err
			continue // the TLS port may have been taken meanwhile
		}
		for _, u := range opts.Users {
			if err := setUser(r.Addr(), u); err != nil {
				r.Stop()
				return nil, err
			}
		}
		return &RedisTLS{Redis: r, TLSPort: ports[0], Server: kp}, nil
	}
	return nil, last
}

// SetUser applies one ACL rule line ("name on >pw ~keys +cmd ...") with
// ACL SETUSER over the plain port.
func (r *RedisTLS) SetUser(rule string) error { return setUser(r.Addr(), rule) }

// setUser sends ACL SETUSER with the words of rule over a new plain
// connection to addr (as the default user) and expects +OK.
func setUser(addr, rule string) error {
	words := append([]string{"ACL", "SETUSER"}, strings.Fields(rule)...)
	reply, err := rawCommand(addr, words...)
	if err != nil {
		return fmt.Errorf("servers: ACL SETUSER on %s: %w", addr, err)
	}
	if reply != "+OK" {
		return fmt.Errorf("servers: ACL SETUSER %s on %s: %s", words[2], addr, reply)
	}
	return nil
}

// rawCommand sends one command as RESP over a new connection and returns
// the first line of the reply.
func rawCommand(addr string, words ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	b := []byte("*" + strconv.Itoa(len(words)) + "\r\n")
	for _, w := range words {
		b = append(b, "$"+strconv.Itoa(len(w))+"\r\n"+w+"\r\n"...)
	}
	if _, err := c.Write(b); err != nil {
		return "", err
	}
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(buf[:n]), "\r\n")
	return line, nil
}

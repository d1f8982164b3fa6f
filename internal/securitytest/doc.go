// Package securitytest holds the tests of lockswap's TLS, authentication
// and least-privilege support against real servers: redis-server with a
// TLS listener and ACL users, and embedded etcd with TLS, client
// certificates and username/password auth (issue 17). It has no code of
// its own; see docs/security.md for what the tests show.
package securitytest

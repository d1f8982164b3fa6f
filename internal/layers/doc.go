// Package layers holds the test that keeps the module's layers apart (see
// docs/layout.md). It has no code of its own.
//
// The layers, by import path under the module:
//
//   - library: every package not named below. It may import only library
//     packages, and does not link the testing package, except a public test
//     harness (conformance, or a package whose name ends in "test" outside
//     internal/), which may link testing but follows the library's other
//     rules.
//   - tooling: cmd/... (the lockswap command and what only it uses). It may
//     import the library and internal/servers, no test infrastructure, and
//     does not link testing.
//   - internal/servers: starts redis-server, a fault proxy and embedded etcd,
//     for the tooling and for tests. It does not link testing; no library
//     package imports it.
//   - test infrastructure: internal/testserver, internal/doccheck,
//     internal/layers and any internal/... package whose name ends in
//     "test" (redistest, queuetest). Only tests import it.
package layers

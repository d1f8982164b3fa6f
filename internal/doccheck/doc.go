// Package doccheck holds the test that type-checks every Go code block of
// README.md and docs/*.md against the current API, so that the documents
// cannot drift from the code. It has no code of its own.
//
// A block is the body of a function that returns an error, with these in
// scope (the names the documents use for the user's own values):
//
//	ctx context.Context; rdb, rdb1, rdb2, rdb3 *goredis.Client;
//	myClusterClient *goredis.ClusterClient; pool *redigo.Pool;
//	client, cli *clientv3.Client; secret string; tlsConfig *tls.Config;
//	v string; work func(context.Context) error; lk *etcdlease.Locker
//
// An import block at its top is allowed and ignored; the packages a block
// uses are imported by their names. A block must use what it declares and
// handle its errors, as code that compiles must.
package doccheck

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/version"

	"github.com/lockswap/lockswap/internal/servers"
)

// devEtcdReady bounds how long lockswap dev etcd waits for its member.
const devEtcdReady = 30 * time.Second

// parseDev parses lockswap dev, which runs a server for trying lockswap
// on this machine: for now an embedded etcd (lockswap dev etcd). Redis
// comes from the redis-server package.
func parseDev(args []string, stdout, _ io.Writer) (job, error) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fmt.Fprintln(stdout, devUsage)
			return nil, flag.ErrHelp
		}
		return nil, usageError("dev: name a server to run: lockswap dev etcd (run \"lockswap dev -h\")")
	}
	switch args[0] {
	case "etcd":
		return parseDevEtcd(args[1:], stdout)
	default:
		return nil, usageError("dev: unknown server %q (want etcd; for Redis install redis-server)", args[0])
	}
}

const devUsage = `usage: lockswap dev etcd [flags]

Runs a server to try lockswap against, in the foreground until Ctrl-C:
  etcd   a single-member etcd embedded in this program (run "lockswap dev etcd -h")

For Redis, install redis-server (apt-get install -y redis-server) and run it.

exit codes:
  0    stopped by Ctrl-C
  1    an error
  2    usage mistake: no or an unknown server, unknown flag, bad value`

func parseDevEtcd(args []string, stdout io.Writer) (job, error) {
	fs := flag.NewFlagSet("dev etcd", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:2379", "host:port clients connect to")
	dataDir := fs.String("data-dir", "", "directory that keeps the data across runs (default: a temporary one, removed at exit)")
	fs.Usage = commandUsage(fs, "[flags]", fmt.Sprintf(
		`Runs a single-member etcd %s embedded in this program until Ctrl-C (then exits 0), for
trying etcd:// URLs on this machine. Not for production: one member, no TLS, no auth
(keep --listen on a loopback address).`, version.Version))
	if err := parseFlags(fs, args, stdout); err != nil {
		return nil, err
	}
	if _, _, err := net.SplitHostPort(*listen); err != nil {
		return nil, usageError("dev etcd: --listen %q: want host:port such as 127.0.0.1:2379 (%v)", *listen, err)
	}
	return func(ctx context.Context) error { return runDevEtcd(ctx, *listen, *dataDir, stdout) }, nil
}

// runDevEtcd runs the embedded etcd of lockswap dev etcd, listening on
// listen with its data in dataDir (a temporary directory when empty),
// until ctx ends.
func runDevEtcd(ctx context.Context, listen, dataDir string, stdout io.Writer) error {
	sctx, cancel := context.WithTimeout(ctx, devEtcdReady)
	defer cancel()
	srv, err := servers.StartDevEtcd(sctx, servers.DevEtcdOptions{ClientAddr: listen, Dir: dataDir})
	if err != nil {
		return fmt.Errorf("dev etcd: %w", err)
	}
	defer srv.Close()
	where := "a temporary directory, removed at exit"
	if dataDir != "" {
		where = dataDir
	}
	fmt.Fprintf(stdout, "etcd %s is listening on %s (data in %s).\nTry:  LOCKSWAP_URL='etcd://%s?prefix=/locks/&ttl=10s' ./app\nCtrl-C stops it.\n",
		version.Version, listen, where, listen)
	select {
	case <-ctx.Done():
		return nil
	case err := <-srv.Member.Err():
		return fmt.Errorf("dev etcd: %w", err)
	}
}

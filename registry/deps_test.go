package registry_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRedisProgramLinksOnlyItsClient: a program that imports one Redis
// backend, one client adapter and the registry links neither etcd nor gRPC
// nor the other Redis client.
func TestRedisProgramLinksOnlyItsClient(t *testing.T) {
	const mod = "github.com/lockswap/lockswap/"
	for _, tc := range []struct {
		imports   []string
		forbidden []string
	}{
		{[]string{"singleredis", "redisclient/goredis", "registry"}, []string{"go.etcd.io/", "google.golang.org/grpc", "github.com/gomodule/redigo", "github.com/redis/rueidis"}},
		{[]string{"redlock", "legacysetnx", "migrate", "redisclient/redigo", "registry"}, []string{"go.etcd.io/", "google.golang.org/grpc", "github.com/redis/go-redis", "github.com/redis/rueidis"}},
		{[]string{"singleredis", "redlock", "legacysetnx", "redisclient/rueidis", "registry"}, []string{"go.etcd.io/", "google.golang.org/grpc", "github.com/redis/go-redis", "github.com/gomodule/redigo"}},
		{[]string{"redisclient"}, []string{"github.com/gomodule/redigo", "github.com/redis/go-redis", "github.com/redis/rueidis"}},
	} {
		args := []string{"list", "-deps"}
		for _, p := range tc.imports {
			args = append(args, mod+p)
		}
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < len(tc.imports) {
			t.Fatalf("go list -deps %v listed %d packages", tc.imports, len(deps))
		}
		for _, d := range deps {
			for _, f := range tc.forbidden {
				if strings.HasPrefix(d, f) {
					t.Errorf("a program importing %v links %s", tc.imports, d)
				}
			}
		}
	}
}

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap/internal/testserver"
)

// TestMigrationWalkthrough runs the shell block of docs/migration.md's
// "Try it" section as written, with bash -e, on a free port instead of
// 6390 and with the lockswap binary of this tree first on PATH: old clients
// played with redis-cli, the check of step 3 failing on an old client's
// live lock and passing once it is released, and the cleanup of step 5
// deleting only the dead old client's key.
func TestMigrationWalkthrough(t *testing.T) {
	testserver.NeedRedisServer(t)
	if _, err := exec.LookPath("redis-cli"); err != nil {
		if os.Getenv(testserver.RequireServersEnv) == "1" {
			t.Fatal("redis-cli not found on PATH and " + testserver.RequireServersEnv + "=1")
		}
		t.Skip("redis-cli not found on PATH")
	}
	doc, err := os.ReadFile("../../docs/migration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Try it")
	_, block, ok2 := strings.Cut(section, "```sh\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 || !strings.Contains(block, "6390") {
		t.Fatal("docs/migration.md has no \"Try it\" section with a sh block on port 6390")
	}
	ports, err := testserver.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ports[0])
	script := strings.ReplaceAll(block, "6390", port)
	pidfile := "/tmp/redis-" + port + ".pid"
	t.Cleanup(func() {
		// The block's last line stops the server; this stops it when the
		// block failed before it, by the PID it wrote.
		if b, err := os.ReadFile(pidfile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				if p, err := os.FindProcess(pid); err == nil {
					p.Kill()
				}
			}
		}
		os.Remove(pidfile)
	})
	bin := lockswapBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.WaitDelay = 10 * time.Second // a child that kept the output open
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the block failed: %v; output:\n%s", err, out)
	}
	text := string(out)
	t.Logf("output:\n%s", text)
	for _, want := range []string{
		"inspect: exit 5",             // an old client's live lock
		"inspect: exit 0",             // released: none left
		"1 stale",                     // the dry run finds the dead one
		"dry run: nothing deleted",    // and deletes nothing
		"deleted 1 of 1 stale keys",   // --apply deletes it
		"live legacy locks: 1 by old", // the first listing
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the output lacks %q:\n%s", want, text)
		}
	}
	if lines := strings.Split(strings.TrimSpace(text), "\n"); strings.TrimSpace(lines[len(lines)-1]) != "1" {
		t.Errorf("EXISTS lock.report lock.invoice did not answer 1 (only lock.invoice left):\n%s", text)
	}
}

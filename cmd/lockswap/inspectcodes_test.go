package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// TestInspectExitCodes: inspect's exit code says what the listing shows:
// 0 for a complete listing in one unit, 3 for MIXED units, 4 for a listing
// cut at --limit, 5 with --fail-on-old-client for a live legacy lock
// without a Redis expiry (an old client's); a cut listing never passes
// --fail-on-old-client, and MIXED comes first.
func TestInspectExitCodes(t *testing.T) {
	srv, _, now, set := keyServer(t)
	live := strconv.FormatInt(now.Add(time.Hour).Unix(), 10)
	liveMs := strconv.FormatInt(now.Add(time.Hour).UnixMilli(), 10)
	// Two live locks of lockswap clients with redis_expiry=true (a Redis
	// expiry), under "a.".
	set("a.one", live, time.Hour)
	set("a.two", live, time.Hour)
	inspect := func(args ...string) (int, string) {
		t.Helper()
		code, _, errOut := runCLI(append([]string{"inspect", "--redis", srv.Addr()}, args...)...)
		return code, errOut
	}
	check := func(what string, want int, say string, args ...string) {
		t.Helper()
		if code, errOut := inspect(args...); code != want || !strings.Contains(errOut, say) {
			t.Errorf("%s: inspect %v: exit %d, stderr %q; want %d saying %q", what, args, code, errOut, want, say)
		}
	}
	check("lockswap's locks only", exitOK, "", "--prefix", "a.", "--fail-on-old-client")
	check("cut at --limit", exitInspectCut, "--limit 1", "--prefix", "a.", "--limit", "1")
	check("cut at --limit, checking for old clients", exitInspectCut, "--limit 1", "--prefix", "a.", "--limit", "1", "--fail-on-old-client")

	set("a.old", live, 0) // an old client's: no Redis expiry
	check("an old client, without the flag", exitOK, "", "--prefix", "a.")
	check("an old client", exitInspectOldSeen, "1 live legacy locks without a Redis expiry", "--prefix", "a.", "--fail-on-old-client")

	set("a.ms", liveMs, time.Hour)
	check("MIXED units", exitInspectMixed, "MIXED", "--prefix", "a.")
	check("MIXED units and an old client", exitInspectMixed, "MIXED", "--prefix", "a.", "--fail-on-old-client")
}

// TestInspectServerClock: inspect judges legacy timestamps by the
// server's clock (miniredis, set 3 hours behind this machine's): an old
// client's lock that passed an hour ago by the local clock is still live
// by the server's, and --fail-on-old-client finds it (exit 5).
func TestInspectServerClock(t *testing.T) {
	mr := miniredis.RunT(t)
	local := time.Now()
	mr.SetTime(local.Add(-3 * time.Hour))
	mr.Set("lock.x", strconv.FormatInt(local.Add(-time.Hour).Unix(), 10))
	code, out, errOut := runCLI("inspect", "--redis", mr.Addr(), "--prefix", "lock.", "--fail-on-old-client")
	if code != exitInspectOldSeen || !strings.Contains(out, "live, 1h59m") && !strings.Contains(out, "live, 2h0m") {
		t.Errorf("exit %d, stderr %q, stdout:\n%s\nwant exit %d and lock.x live for 2h by the server's clock", code, errOut, out, exitInspectOldSeen)
	}
}

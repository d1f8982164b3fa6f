package main

import (
	"strings"
	"testing"
)

// TestSoakUsage: soak's usage mistakes exit 2 with one line naming the
// flag; --list prints the selected configurations without running any.
// (The runs themselves are tested in internal/soak.)
func TestSoakUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"soak", "--load", "nope"}, "--load"},
		{[]string{"soak", "--configs", "nope*"}, "nope*"},
		{[]string{"soak", "--duration", "0s"}, "--duration"},
		{[]string{"soak", "--deadline", "-1s"}, "--deadline"},
		{[]string{"soak", "--hogs", "0"}, "--hogs"},
		{[]string{"soak", "--goroutines", "0"}, "--goroutines"},
		{[]string{"soak", "extra"}, "extra"},
	} {
		code, _, errOut := runCLI(tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and one line naming %q", tc.args, code, errOut, exitUsage, tc.want)
		}
	}
	code, out, errOut := runCLI("soak", "--list", "--configs", "etcdlease,redlock5+fence/300ms/*")
	if want := "redlock5+fence/300ms/goredis\nredlock5+fence/300ms/redigo\nredlock5+fence/300ms/rueidis\netcdlease/1s\n"; code != 0 || out != want {
		t.Errorf("soak --list: exit %d, stdout %q, stderr %q; want exit 0 and %q", code, out, errOut, want)
	}
	if code, out, _ := runCLI("soak", "-h"); code != 0 || !strings.Contains(out, "-duration") {
		t.Errorf("soak -h: exit %d, stdout %q", code, out)
	}
}

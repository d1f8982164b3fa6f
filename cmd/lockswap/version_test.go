package main

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionCommand: `lockswap version` prints the build's Go version
// and platform, and exits 0.
func TestVersionCommand(t *testing.T) {
	code, out, errOut := runCLI("version")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"lockswap ", runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH} {
		if !strings.Contains(out, want) {
			t.Errorf("version output lacks %q:\n%s", want, out)
		}
	}
	if code, _, _ := runCLI("version", "--bogus"); code == 0 {
		t.Error("version --bogus exited 0")
	}
}

// TestVersionText: what `go install module@version` and VCS stamping record
// is what the command prints.
func TestVersionText(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.99.1",
		Main:      debug.Module{Path: "github.com/lockswap/lockswap", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-11-23T19:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	want := `lockswap v1.2.3
module:   github.com/lockswap/lockswap
revision: 0123456789abcdef0123456789abcdef01234567 (2026-11-23T19:00:00Z), with uncommitted changes
go:       go1.99.1 linux/arm64
`
	if got := versionText(bi, "linux", "arm64"); got != want {
		t.Errorf("versionText:\n%s\nwant:\n%s", got, want)
	}
	// A build without VCS information and without a version.
	bare := &debug.BuildInfo{GoVersion: "go1.99.1"}
	if got, want := versionText(bare, "darwin", "amd64"), "lockswap (devel)\ngo:       go1.99.1 darwin/amd64\n"; got != want {
		t.Errorf("versionText without build settings = %q, want %q", got, want)
	}
}

package main

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockswap/lockswap/internal/testserver"
)

// authPassword is the password of authServer; no output may show it.
const authPassword = "Auth-Test-Pw-7f3c"

// authServer starts a redis-server that wants authPassword, holding one
// lock key, lock.a.
func authServer(t *testing.T) string {
	t.Helper()
	srv := testserver.RedisT(t, testserver.RedisOptions{})
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Set(ctx, "lock.a", "0123456789abcdef0123456789abcdef", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	// Last: the harness's own connections (readiness) use no password.
	if err := c.ConfigSet(ctx, "requirepass", authPassword).Err(); err != nil {
		t.Fatal(err)
	}
	return srv.Addr()
}

// TestInspectAuth: inspect (and cleanup, which shares its flags) logs in with a password from --password, a
// redis:// URL, REDISCLI_AUTH or REDIS_PASSWORD, in that order; a server
// that wants one, or refuses it, gets an error that says how to give one
// or where the refused one came from; the password shows nowhere (issue
// 30, "Auth everywhere").
func TestInspectAuth(t *testing.T) {
	addr := authServer(t)
	pwURL := "redis://:" + url.PathEscape(authPassword) + "@" + addr
	for _, c := range []struct {
		name     string
		args     []string
		env      map[string]string
		code     int
		want     string // in stdout when code is 0, else in stderr
		wantNot  string // not in stderr
		password string // a password given, which must show nowhere
	}{
		{name: "none", args: nil, code: exitError, want: "REDISCLI_AUTH", wantNot: "do not answer"},
		{name: "flag", args: []string{"--password", authPassword}, code: exitOK, want: "lock.a"},
		{name: "url", args: nil, code: exitOK, want: "lock.a"},
		{name: "REDISCLI_AUTH", env: map[string]string{"REDISCLI_AUTH": authPassword}, code: exitOK, want: "lock.a"},
		{name: "REDIS_PASSWORD", env: map[string]string{"REDIS_PASSWORD": authPassword}, code: exitOK, want: "lock.a"},
		{name: "flag wins", args: []string{"--password", authPassword}, env: map[string]string{"REDISCLI_AUTH": "wrong-cli-auth"}, code: exitOK, want: "lock.a"},
		{name: "REDISCLI_AUTH before REDIS_PASSWORD", env: map[string]string{"REDISCLI_AUTH": "wrong-cli-auth", "REDIS_PASSWORD": authPassword},
			code: exitError, want: "came from REDISCLI_AUTH", password: "wrong-cli-auth"},
		{name: "wrong", args: []string{"--password", "wrong-flag-pw"}, code: exitError, want: "came from --password", password: "wrong-flag-pw"},
		{name: "url and flag", args: []string{"--password", authPassword}, code: exitUsage, want: "give one"},
	} {
		for _, command := range []string{"inspect", "cleanup"} {
			t.Run(command+"/"+c.name, func(t *testing.T) {
				for _, v := range []string{"REDISCLI_AUTH", "REDIS_PASSWORD"} {
					t.Setenv(v, c.env[v])
				}
				target := addr
				if c.name == "url" || c.name == "url and flag" {
					target = pwURL
				}
				args := append([]string{command, "--redis", target, "--prefix", "lock."}, c.args...)
				want := c.want
				if command == "cleanup" {
					args = append(args, "--older-than", "1h")
					if c.code == exitOK {
						want = "dry run" // cleanup lists stale keys only
					}
				}
				code, out, errOut := runCLI(args...)
				if code != c.code {
					t.Fatalf("exit %d, want %d; stderr %q", code, c.code, errOut)
				}
				where := errOut
				if code == exitOK {
					where = out
				}
				if !strings.Contains(where, want) {
					t.Errorf("output lacks %q:\nstdout %q\nstderr %q", want, out, errOut)
				}
				if c.wantNot != "" && strings.Contains(errOut, c.wantNot) {
					t.Errorf("stderr says %q: %q", c.wantNot, errOut)
				}
				for _, pw := range []string{authPassword, c.password} {
					if pw != "" && (strings.Contains(out, pw) || strings.Contains(errOut, pw)) {
						t.Errorf("the password %q shows:\nstdout %q\nstderr %q", pw, out, errOut)
					}
				}
			})
		}
	}
}

// TestCompareAuth: compare --redis logs in to a server that wants a
// password as inspect does, and a refused login is an error (exit 1) that
// says how to give a password, not "your servers do not answer" (exit 4).
func TestCompareAuth(t *testing.T) {
	addr := authServer(t)
	run := func(t *testing.T, args ...string) (int, string, string) {
		t.Helper()
		args = append([]string{"compare", "--backends", "singleredis", "--scenarios", "contention", "--iterations", "2", "--redis"}, args...)
		code, out, errOut := runCLI(args...)
		if strings.Contains(out+errOut, authPassword) {
			t.Errorf("the password shows:\nstdout %q\nstderr %q", out, errOut)
		}
		return code, out, errOut
	}
	t.Setenv("REDISCLI_AUTH", "")
	t.Setenv("REDIS_PASSWORD", "")
	if code, _, errOut := run(t, addr); code != exitError || !strings.Contains(errOut, "refused the login") ||
		!strings.Contains(errOut, "REDISCLI_AUTH") || strings.Contains(errOut, "do not answer") {
		t.Errorf("no password: exit %d, stderr %q; want 1 and how to give a password", code, errOut)
	}
	for name, args := range map[string][]string{
		"flag": {addr, "--password", authPassword},
		"url":  {"redis://:" + url.PathEscape(authPassword) + "@" + addr},
	} {
		if code, out, errOut := run(t, args...); code != exitOK || !strings.Contains(out, "contention") ||
			strings.Contains(errOut, "could not delete") {
			t.Errorf("%s: exit %d, stderr %q, stdout:\n%s", name, code, errOut, out)
		}
	}
	t.Setenv("REDISCLI_AUTH", authPassword)
	if code, out, errOut := run(t, addr); code != exitOK {
		t.Errorf("REDISCLI_AUTH: exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
	if code, _, errOut := runCLI("compare", "--password", authPassword); code != exitUsage || strings.Contains(errOut, authPassword) {
		t.Errorf("--password without --redis: exit %d, stderr %q; want 2, without the password", code, errOut)
	}
}

package main

import (
	"bytes"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// cliSeeds are argument lists per command, the fuzzers' starting points:
// good ones, mistakes, and passwords in each place a user may put one.
var cliSeeds = map[string][][]string{
	"compare": {
		{"--columns", "redlock?restart_safety=true,legacysetnx?unit=ms", "--scenarios", "holder-pause", "--format", "json"},
		{"--backends", "singleredis,etcdlease", "--iterations", "3", "--budget", "30s", "--miniredis"},
		{"--columns", "singleredis?password=hunter2222&fence=true"},
		{"--columns", "redlock?password=hunter2222&bogus=1"},
		{"--redis", "redis://user:hunter2222@127.0.0.1:6379", "--format", "nope"},
		{"--redis", "127.0.0.1:1,127.0.0.1:2", "--etcd", "http://u:hunter2222@127.0.0.1:2379"},
		{"--etcd", "http://127.0.0.1:2379,127.0.0.1:2380", "--scenarios", "holder-pause"},
		{"--iterations=-1", "--budget=0"},
		{"--scenarios", "no-such-scenario"},
		{"-h"},
	},
	"bench": {
		{"--backends", "redlock,memlock", "--duration", "2s"},
		{"--backends", "singleredis?password=hunter2222"},
		{"--duration", "0"},
	},
	"soak": {
		{"--configs", "redlock3+fence/300ms/redigo,*/*/rueidis", "--duration", "1s", "--load", "idle", "--list"},
		{"--configs", "[", "--hogs", "0"},
		{"--goroutines", "0", "--deadline", "-1s"},
	},
	"history": {
		{"--configs", "singleredis*,redlock3+fence", "--for", "1s", "--seed", "42", "--list"},
		{"--configs", "[", "--clients", "1"},
		{"--for", "0", "--out", "/tmp/x", "--progress"},
		{"--redis", "redis://:hunter2222@127.0.0.1:6379,127.0.0.1:6380,h", "--etcd", "127.0.0.1:2379", "--list"},
		{"--password", "hunter2222", "--etcd", "u:hunter2222@h"},
	},
	"inspect": {
		{"--redis", "127.0.0.1:6379", "--prefix", "lock.", "--limit", "10", "--password", "hunter2222"},
		{"--redis", "redis://:hunter2222@127.0.0.1:6379"},
		{"--redis", "u:hunter2222@127.0.0.1", "--password=hunter2222", "--limit", "-1"},
		{"--password", "hunter2222", "--timeout", "0s"},
		{"--redis", "[::1]", "stray"},
		{"--redis", "h", "--password=", "hunter2222"},
		{"--redis", "h", "--prefix", "--password", "hunter2222"},
	},
	"cleanup": {
		{"--redis", "127.0.0.1:6379", "--prefix", "lock.", "--older-than", "24h", "--apply", "--password", "hunter2222"},
		{"--redis", "redis://:hunter2222@127.0.0.1:6379/2", "--prefix", "", "--older-than", "1s"},
		{"--redis", "h", "--older-than", "0s", "--timeout", "-1s"},
	},
	"version": {{}, {"--json"}},
	"dev":     {{"etcd", "--listen", "127.0.0.1:0", "--data-dir", "/tmp/x"}, {"etcd", "--listen", "nope"}, {"redis"}, {}},
}

// FuzzCLIFlags: whatever the arguments, a command's parser does not panic,
// fails only with a usage mistake (exit code 2) or -h, writes nothing on
// stderr itself, and what the command prints (its -h on stdout, its error
// on stderr) never shows a password given in the arguments (the value of
// --password, the password of a URL's user information, a password=
// parameter). The seeds run with go test; run
// longer with
//
//	go test -run '^$' -fuzz FuzzCLIFlags -fuzztime 5m ./cmd/lockswap/
//
// An input is a command name and its arguments, one per line.
func FuzzCLIFlags(f *testing.F) {
	for name, lists := range cliSeeds {
		for _, args := range lists {
			f.Add(name, strings.Join(args, "\n"))
		}
	}
	f.Fuzz(func(t *testing.T, name, lines string) {
		var args []string
		if lines != "" {
			args = strings.Split(lines, "\n")
		}
		checkParse(t, name, args)
	})
}

// TestCLIFlagsMutated runs the checks of FuzzCLIFlags on 1,500 argument
// lists made from the seeds by a fixed pseudo-random sequence of edits
// (flags swapped between commands, values replaced, split and joined,
// passwords moved around), so that CI explores more than the seeds in a
// few seconds, the same inputs every run.
func TestCLIFlagsMutated(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var pool []string // every seed argument, the material of the edits
	var names []string
	for name, lists := range cliSeeds {
		names = append(names, name)
		for _, args := range lists {
			pool = append(pool, args...)
		}
	}
	slices.Sort(names)
	slices.Sort(pool)
	pool = slices.Compact(pool)
	odd := []string{"", "-", "--", "=", "-h", "--help", "-password", "--password=", "%", "\x00", "é", "\u023a", "\u212a", "\xff", "@", ":", "://", "?", "&", "password=", strings.Repeat("x", 5000)}
	for range 1500 {
		name := names[r.IntN(len(names))]
		lists := cliSeeds[name]
		args := slices.Clone(lists[r.IntN(len(lists))])
		for range 1 + r.IntN(3) {
			switch r.IntN(5) {
			case 0: // insert an argument from any command
				i := r.IntN(len(args) + 1)
				args = slices.Insert(args, i, pool[r.IntN(len(pool))])
			case 1: // insert something odd
				i := r.IntN(len(args) + 1)
				args = slices.Insert(args, i, odd[r.IntN(len(odd))])
			case 2: // delete one
				if len(args) > 0 {
					i := r.IntN(len(args))
					args = slices.Delete(args, i, i+1)
				}
			case 3: // splice something odd into one
				if len(args) > 0 {
					i := r.IntN(len(args))
					at := r.IntN(len(args[i]) + 1)
					args[i] = args[i][:at] + odd[r.IntN(len(odd))] + args[i][at:]
				}
			case 4: // join two with =
				if len(args) > 1 {
					i := r.IntN(len(args) - 1)
					args = slices.Replace(args, i, i+2, args[i]+"="+args[i+1])
				}
			}
		}
		checkParse(t, name, args)
	}
}

// secretMarker stands for a password in the arguments checkParse parses.
// It cannot be in any output by chance.
const secretMarker = "Zq7SecretMarker"

// checkParse parses args with the parser of command name (an unknown name
// is skipped) and checks what FuzzCLIFlags promises. Every password in
// args is first replaced with secretMarker, so that finding it in the
// output means it was repeated, never that it is a word of a message.
func checkParse(t *testing.T, name string, args []string) {
	t.Helper()
	parse, ok := commands[name]
	if !ok {
		return
	}
	for _, a := range args {
		if strings.Contains(a, secretMarker) {
			return
		}
	}
	args, planted := plantSecrets(args)
	var stdout, stderr bytes.Buffer
	var (
		j   job
		err error
	)
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("lockswap %s %q: the parser panicked: %v", name, args, p)
			}
		}()
		j, err = parse(args, &stdout, &stderr)
	}()
	if err == nil && j == nil {
		t.Fatalf("lockswap %s %q: no error and no job", name, args)
	}
	if stderr.Len() > 0 {
		t.Errorf("lockswap %s %q: the parser wrote on stderr: %q", name, args, stderr.String())
	}
	var printed bytes.Buffer // what the command prints of err
	if code := report(&printed, name, err); code != exitOK && code != exitUsage {
		t.Fatalf("lockswap %s %q: the parser failed with exit code %d, not a usage mistake (2): %s", name, args, code, printed.String())
	}
	if !planted {
		return
	}
	for what, text := range map[string]string{"stdout": stdout.String(), "stderr": printed.String()} {
		if strings.Contains(text, secretMarker) {
			t.Fatalf("lockswap %s %q: %s shows a password: %q", name, args, what, text)
		}
	}
}

var (
	// userinfoPassword finds the password of a URL's user information.
	// With no scheme, user:password@host.
	userinfoPassword = regexp.MustCompile(`(?:://|^)[^/?#@:]*:([^/?#@]*)@`)
	// queryPassword finds a password= parameter's value.
	queryPassword = regexp.MustCompile(`(?:^|[?&])password=([^&#]*)`)
)

// plantSecrets returns args with every password in them replaced by
// secretMarker, and whether there was one: the value of -password or
// --password (as the next argument, or after =), the password of a URL's
// user information, and the value of a password= parameter.
func plantSecrets(args []string) ([]string, bool) {
	out := slices.Clone(args)
	planted := false
	replace := func(s string, re *regexp.Regexp) string {
		return re.ReplaceAllStringFunc(s, func(m string) string {
			sub := re.FindStringSubmatchIndex(m)
			planted = true
			return m[:sub[2]] + secretMarker + m[sub[3]:]
		})
	}
	for i := 0; i < len(out); i++ {
		flagName, value, hasValue := strings.Cut(strings.TrimLeft(out[i], "-"), "=")
		if strings.HasPrefix(out[i], "-") && flagName == "password" {
			switch {
			case hasValue && value == "" && i+1 < len(out):
				// --password= then the password as the next argument:
				// flag takes the empty value, and the password is a
				// stray argument.
				out[i+1] = secretMarker
				planted = true
				i++
			case hasValue:
				out[i] = out[i][:len(out[i])-len(value)] + secretMarker
				planted = true
			case i+1 < len(out):
				out[i+1] = secretMarker
				planted = true
				i++
			}
			continue
		}
		out[i] = replace(replace(out[i], userinfoPassword), queryPassword)
	}
	return out, planted
}

package main

import (
	"bufio"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// commandLine matches a lockswap command line in a fenced code block of
// the docs: `lockswap cmd ...`, `/path/lockswap cmd ...` or
// `go run ./cmd/lockswap cmd ...`; the group is what follows "lockswap ".
var commandLine = regexp.MustCompile(`^\s*(?:go run \./cmd/lockswap|\S*lockswap) ([a-z].*)$`)

// TestDocCommands: every lockswap command line in a code block of
// README.md and docs/*.md parses as written (its flags exist and its
// values are valid), so that the commands users copy work. It parses
// them, runs none; a comment after " #" is left out, and ” is an empty
// argument.
func TestDocCommands(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	checked := 0
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		fenced := false
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
				continue
			}
			m := commandLine.FindStringSubmatch(line)
			if !fenced || m == nil {
				continue
			}
			text, _, _ := strings.Cut(m[1], " #")
			for _, op := range []string{" || ", " && ", " | ", "; "} {
				text, _, _ = strings.Cut(text, op) // the shell's, after the command
			}
			args := strings.Fields(text)
			for i, a := range args {
				if a == "''" {
					args[i] = ""
				}
				args[i] = strings.Trim(args[i], "'")
			}
			checked++
			parse, ok := commands[args[0]]
			if !ok {
				t.Errorf("%s:%d: %q: no such command", file, n, line)
				continue
			}
			if _, err := parse(args[1:], io.Discard, io.Discard); err != nil && !errors.Is(err, flag.ErrHelp) {
				t.Errorf("%s:%d: %q does not parse: %v", file, n, line, err)
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if checked < 5 {
		t.Errorf("checked %d command lines; the docs have more (is the pattern right?)", checked)
	}
}

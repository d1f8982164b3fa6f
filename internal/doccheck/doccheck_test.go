package doccheck

import (
	"bufio"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/scanner"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// packages maps the package names the documents use to import paths.
var packages = map[string]string{
	"context":     "context",
	"errors":      "errors",
	"fmt":         "fmt",
	"log":         "log",
	"time":        "time",
	"slog":        "log/slog",
	"os":          "os",
	"tls":         "crypto/tls",
	"url":         "net/url",
	"lockswap":    "github.com/lockswap/lockswap",
	"backend":     "github.com/lockswap/lockswap/backend",
	"singleredis": "github.com/lockswap/lockswap/singleredis",
	"redlock":     "github.com/lockswap/lockswap/redlock",
	"legacysetnx": "github.com/lockswap/lockswap/legacysetnx",
	"etcdlease":   "github.com/lockswap/lockswap/etcdlease",
	"migrate":     "github.com/lockswap/lockswap/migrate",
	"redisclient": "github.com/lockswap/lockswap/redisclient",
	"registry":    "github.com/lockswap/lockswap/registry",
	"memlock":     "github.com/lockswap/lockswap/memlock",
	"fenced":      "github.com/lockswap/lockswap/fenced",
	"goredis":     "github.com/lockswap/lockswap/redisclient/goredis",
	"redigo":      "github.com/lockswap/lockswap/redisclient/redigo",
	"lsrueidis":   "github.com/lockswap/lockswap/redisclient/rueidis",
	"rueidis":     "github.com/redis/rueidis",
	"redis":       "github.com/redis/go-redis/v9",
	"redigoredis": "github.com/gomodule/redigo/redis",
	"clientv3":    "go.etcd.io/etcd/client/v3",
}

const prelude = `ctx context.Context, rdb, rdb1, rdb2, rdb3 *redis.Client, myClusterClient *redis.ClusterClient,
	pool *redigoredis.Pool, client, cli *clientv3.Client, secret string, tlsConfig *tls.Config, v string,
	work func(context.Context) error, lk *etcdlease.Locker`

type block struct {
	file string
	line int
	src  string
}

// blocks returns the ```go blocks of the documents.
func blocks(t *testing.T) []block {
	root := filepath.Join("..", "..")
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	var out []block
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		var cur *block
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			switch {
			case cur == nil && strings.TrimSpace(line) == "```go":
				cur = &block{file: f, line: n + 1}
			case cur != nil && strings.TrimSpace(line) == "```":
				out = append(out, *cur)
				cur = nil
			case cur != nil:
				cur.src += line + "\n"
			}
		}
		fh.Close()
	}
	return out
}

var importBlock = regexp.MustCompile(`(?s)^\s*import\s*\(.*?\)\s*\n`)

// source turns a block into a Go file: a block that is a file (it starts
// with a package clause) as it is, any other the body of a function.
func source(i int, b block) (string, []string) {
	if strings.HasPrefix(b.src, "package ") {
		// A complete file (README's program): checked as it is.
		return fmt.Sprintf("//line %s:%d\n%s", filepath.Base(b.file), b.line, b.src), nil
	}
	body := importBlock.ReplaceAllString(b.src, "")
	used := map[string]bool{"context": true, "redis": true, "redigoredis": true, "clientv3": true, "tls": true, "etcdlease": true}
	// Identifiers followed by a dot, outside comments and strings.
	var sc scanner.Scanner
	fset := token.NewFileSet()
	sc.Init(fset.AddFile("", -1, len(body)), []byte(body), nil, 0)
	prev := ""
	for {
		_, tok, lit := sc.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.PERIOD && prev != "" {
			if _, ok := packages[prev]; ok {
				used[prev] = true
			}
		}
		prev = ""
		if tok == token.IDENT {
			prev = lit
		}
	}
	var names []string
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	var sb strings.Builder
	sb.WriteString("package snippets\n\nimport (\n")
	var paths []string
	for _, n := range names {
		fmt.Fprintf(&sb, "\t%s %q\n", n, packages[n])
		paths = append(paths, packages[n])
	}
	fmt.Fprintf(&sb, ")\n\n//line %s:%d\nfunc snippet%d(%s) error {\n", filepath.Base(b.file), b.line, i, prelude)
	fmt.Fprintf(&sb, "//line %s:%d\n%s\n\treturn nil\n}\n", filepath.Base(b.file), b.line, body)
	return sb.String(), paths
}

// exports returns the export data files of paths and their dependencies,
// built by the go command.
func exports(t *testing.T, paths []string) map[string]string {
	args := append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}"}, paths...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if p, f, ok := strings.Cut(line, "="); ok && f != "" {
			m[p] = f
		}
	}
	return m
}

// checker type-checks blocks against the module's current packages.
type checker struct {
	fset *token.FileSet
	imp  types.Importer
}

func newChecker(t *testing.T) *checker {
	var all []string
	for _, p := range packages {
		all = append(all, p)
	}
	exp := exports(t, all)
	fset := token.NewFileSet()
	return &checker{fset: fset, imp: importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exp[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})}
}

// check returns the compile errors of block b.
func (c *checker) check(i int, b block) []string {
	src, _ := source(i, b)
	f, err := parser.ParseFile(c.fset, fmt.Sprintf("block%d.go", i), src, parser.ParseComments)
	if err != nil {
		return []string{"does not parse as a function body: " + err.Error()}
	}
	var errs []string
	conf := types.Config{Importer: c.imp, Error: func(err error) { errs = append(errs, err.Error()) }}
	_, _ = conf.Check("snippets", c.fset, []*ast.File{f}, nil)
	return errs
}

// TestDocBlocksCompile type-checks every Go block of the documents.
func TestDocBlocksCompile(t *testing.T) {
	bs := blocks(t)
	if len(bs) < 10 {
		t.Fatalf("found %d Go blocks in README.md and docs/, want the ten or more they have", len(bs))
	}
	c := newChecker(t)
	for i, b := range bs {
		t.Run(fmt.Sprintf("%s:%d", filepath.Base(b.file), b.line), func(t *testing.T) {
			if errs := c.check(i, b); len(errs) > 0 {
				t.Errorf("does not compile:\n\t%s\n--- block:\n%s", strings.Join(errs, "\n\t"), b.src)
			}
		})
	}
}

// TestCheckerRejects: the check fails blocks that would not compile, or
// that ignore what they declare (an unchecked error among them).
func TestCheckerRejects(t *testing.T) {
	c := newChecker(t)
	for _, src := range []string{
		"l, err := singleredis.New(nil, singleredis.Options{NoSuchField: true})\n_ = l\nreturn err\n",
		"locker, err := singleredis.New(goredis.New(rdb), singleredis.Options{})\n_ = locker\n",
		"lockswap.NoSuchFunc()\n",
	} {
		if errs := c.check(0, block{file: "self-test.md", line: 1, src: src}); len(errs) == 0 {
			t.Errorf("block accepted, want it refused:\n%s", src)
		}
	}
}

// TestCIRunsTheREADMECommand: the README's test command (the second line
// of "The two commands") is the command CI runs, as written, so that
// what passes in CI is what a user runs.
func TestCIRunsTheREADMECommand(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?m)^(go test [^#\n]*?)\\s*# the tests").FindSubmatch(readme)
	if m == nil {
		t.Fatal(`README.md has no line "go test ... # the tests"`)
	}
	cmd := string(m[1])
	if !regexp.MustCompile("(?m)^" + regexp.QuoteMeta(cmd) + "$").Match(ci) {
		t.Errorf(".ci/run does not run the README's test command %q as a line of its own", cmd)
	}
}

package layers

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// pkg is one package of the module as `go list` describes it.
type pkg struct {
	path    string
	imports []string // direct imports, without those of its tests
	deps    []string // transitive imports, without those of its tests
}

// layer is where a package sits.
type layer int

const (
	library layer = iota
	harness       // a public test harness: library rules, but may link testing
	tooling
	servers
	testInfra
)

func (l layer) String() string {
	return [...]string{"library", "public test harness", "tooling", "internal/servers", "test infrastructure"}[l]
}

// classify returns the layer of path, a package of module mod. It returns
// false for a package outside the module.
func classify(mod, path string) (layer, bool) {
	if path != mod && !strings.HasPrefix(path, mod+"/") {
		return 0, false
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(path, mod), "/")
	name := rel[strings.LastIndex(rel, "/")+1:]
	inInternal := rel == "internal" || strings.HasPrefix(rel, "internal/") || strings.Contains(rel, "/internal/")
	switch {
	case rel == "cmd" || strings.HasPrefix(rel, "cmd/"):
		return tooling, true
	case rel == "internal/servers":
		return servers, true
	case rel == "internal/testserver" || rel == "internal/doccheck" || rel == "internal/layers",
		inInternal && strings.HasSuffix(name, "test"):
		return testInfra, true
	case rel == "conformance", !inInternal && strings.HasSuffix(name, "test"):
		return harness, true
	}
	return library, true
}

// allowed reports whether a package of layer from may depend on one of
// layer to.
func allowed(from, to layer) bool {
	switch from {
	case library, harness:
		return to == library || to == harness
	case tooling, servers:
		return to != testInfra && (from == tooling || to != tooling)
	case testInfra:
		return to != tooling
	}
	return false
}

// mayLinkTesting reports whether a package of layer l may link the testing
// package.
func mayLinkTesting(l layer) bool { return l == harness || l == testInfra }

// check returns one line per broken rule among pkgs, packages of module mod.
func check(mod string, pkgs []pkg) []string {
	byPath := map[string]pkg{}
	for _, p := range pkgs {
		byPath[p.path] = p
	}
	var bad []string
	for _, p := range pkgs {
		from, ok := classify(mod, p.path)
		if !ok {
			continue
		}
		// A forbidden dependency is reported where it is imported: every
		// chain to it has a first package that may not import the next.
		for _, d := range p.imports {
			if to, ok := classify(mod, d); ok && !allowed(from, to) {
				bad = append(bad, p.path+" ("+from.String()+") imports "+d+" ("+to.String()+")")
			}
		}
		if slices.Contains(p.deps, "testing") && !mayLinkTesting(from) {
			bad = append(bad, p.path+" ("+from.String()+") links testing: "+chain(byPath, p.path, "testing"))
		}
	}
	return bad
}

// chain returns a shortest import chain from one package to another, as
// "a -> b -> c", so a failure names the import that links it.
func chain(byPath map[string]pkg, from, to string) string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			var path []string
			for p := to; p != ""; p = prev[p] {
				path = append(path, p)
			}
			slices.Reverse(path)
			return strings.Join(path, " -> ")
		}
		for _, next := range byPath[cur].imports {
			if _, seen := prev[next]; !seen {
				prev[next] = cur
				queue = append(queue, next)
			}
		}
	}
	return from + " -> ... -> " + to
}

// goList describes the packages matching patterns (run from the module
// root) with every package they depend on.
func goList(t *testing.T, patterns ...string) []pkg {
	t.Helper()
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .Deps \" \"}}"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var pkgs []pkg
	// Trim only the final newline: a package without imports ends its
	// line with two tabs, which TrimSpace would cut from the last line.
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			t.Fatalf("go list line %q: want 3 tab-separated fields", line)
		}
		pkgs = append(pkgs, pkg{path: f[0], imports: strings.Fields(f[1]), deps: strings.Fields(f[2])})
	}
	return pkgs
}

// readSources reads every directory, .go file and go.mod of the module
// under root. The test learns the imports from a go subprocess, whose reads
// the test cache does not see; reading the files here makes a change to any
// of them rerun the test instead of reporting a cached pass.
func readSources(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir // another module (bench)
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") || d.Name() == "go.mod" {
			_, err = os.ReadFile(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func modulePath(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// TestLayers: no library package imports the tooling, internal/servers or
// test infrastructure, or links testing; the tooling (the lockswap command
// first) and internal/servers import no test infrastructure and link no
// testing.
func TestLayers(t *testing.T) {
	readSources(t, "../..")
	mod := modulePath(t)
	pkgs := goList(t, "./...")
	for _, want := range []string{mod, mod + "/cmd/lockswap", mod + "/internal/servers", mod + "/internal/testserver"} {
		if !slices.ContainsFunc(pkgs, func(p pkg) bool { return p.path == want }) {
			t.Fatalf("go list ./... did not list %s; the check would check nothing", want)
		}
	}
	for _, line := range check(mod, pkgs) {
		t.Error(line)
	}
}

// TestCheckFindsBrokenLayers: the check reports each kind of broken rule,
// with the chain of imports that breaks it, and accepts what is allowed.
func TestCheckFindsBrokenLayers(t *testing.T) {
	const m = "example.com/m"
	pkgs := []pkg{
		{path: m, imports: []string{m + "/internal/helper"}, deps: []string{m + "/internal/helper", m + "/internal/redistest", "testing"}},
		{path: m + "/internal/helper", imports: []string{m + "/internal/redistest"}, deps: []string{m + "/internal/redistest", "testing"}},
		{path: m + "/internal/redistest", imports: []string{"testing", m + "/internal/servers"}, deps: []string{"testing", m + "/internal/servers"}},
		{path: m + "/internal/servers"},
		{path: m + "/backend", imports: []string{m + "/cmd/tool/internal/render"}, deps: []string{m + "/cmd/tool/internal/render"}},
		{path: m + "/backend2", imports: []string{m + "/internal/servers"}, deps: []string{m + "/internal/servers"}},
		{path: m + "/cmd/tool", imports: []string{m + "/internal/testserver"}, deps: []string{m + "/internal/testserver", "testing"}},
		{path: m + "/cmd/tool/internal/render", imports: []string{m, m + "/internal/servers"}, deps: []string{m, m + "/internal/servers"}},
		{path: m + "/conformance", imports: []string{"testing", m}, deps: []string{"testing", m}},
		{path: m + "/driver/drivertest", imports: []string{"testing"}, deps: []string{"testing"}},
		{path: m + "/internal/testserver", imports: []string{"testing", m + "/internal/servers"}, deps: []string{"testing", m + "/internal/servers"}},
	}
	got := check(m, pkgs)
	want := []string{
		m + " (library) links testing: " + m + " -> " + m + "/internal/helper -> " + m + "/internal/redistest -> testing",
		m + "/internal/helper (library) imports " + m + "/internal/redistest (test infrastructure)",
		m + "/internal/helper (library) links testing: " + m + "/internal/helper -> " + m + "/internal/redistest -> testing",
		m + "/backend (library) imports " + m + "/cmd/tool/internal/render (tooling)",
		m + "/backend2 (library) imports " + m + "/internal/servers (internal/servers)",
		m + "/cmd/tool (tooling) imports " + m + "/internal/testserver (test infrastructure)",
		m + "/cmd/tool (tooling) links testing: " + m + "/cmd/tool -> " + m + "/internal/testserver -> testing",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("check reported:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

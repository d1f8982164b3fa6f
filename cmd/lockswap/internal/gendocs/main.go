// Command gendocs regenerates docs/guarantees.md: the declared table from
// every backend's Guarantees(), and (unless -declared-only) the measured
// table from a compare run. Run it through `go generate ./...`.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/lockswap/lockswap/cmd/lockswap/internal/compare"
)

func main() {
	doc := flag.String("doc", "docs/guarantees.md", "the file to update")
	declaredOnly := flag.Bool("declared-only", false, "update only the declared part (no compare run)")
	flag.Parse()
	if err := run(*doc, *declaredOnly); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}

func run(path string, declaredOnly bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(b)
	old, err := compare.Section(doc, compare.DeclaredBegin, compare.DeclaredEnd)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	doc = strings.Replace(doc, old, compare.DeclaredBlock(), 1)
	if !declaredOnly {
		res, err := compare.Run(context.Background(), compare.Options{Progress: os.Stderr})
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := res.WriteMarkdown(&buf); err != nil {
			return err
		}
		if n, m := res.Contradictions(), res.Inconclusives(); n+m > 0 {
			return fmt.Errorf("compare found %d contradiction(s) and %d inconclusive cell(s); not writing them into the docs:\n%s", n, m, buf.String())
		}
		oldM, err := compare.Section(doc, compare.MeasuredBegin, compare.MeasuredEnd)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		doc = strings.Replace(doc, oldM, compare.MeasuredBegin+"\n\n"+buf.String()+"\n"+compare.MeasuredEnd, 1)
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

// Package mdcheck renders markdown as CommonMark with GitHub tables (with
// goldmark) and reports its structure, so that tests can check that
// generated markdown renders as intended: a table, a numbered list of
// notes, no paragraph that runs several lines together. Only tests import
// it.
package mdcheck

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// Table is one rendered table.
type Table struct {
	// HeaderCells counts the cells of the header row.
	HeaderCells int
	// Rows counts the body rows.
	Rows int
}

// Structure is what a markdown document renders to.
type Structure struct {
	Tables []Table
	// OrderedItems holds, for each item of each numbered list, how many
	// items its nested bullet lists have.
	OrderedItems []int
	// RunOn are paragraphs of more than one source line: text that a
	// renderer joins into one paragraph.
	RunOn []string
	// HTML is the rendered document.
	HTML string
}

// Parse renders md and returns its structure.
func Parse(md []byte) (Structure, error) {
	gm := goldmark.New(goldmark.WithExtensions(extension.Table))
	var s Structure
	var html bytes.Buffer
	if err := gm.Convert(md, &html); err != nil {
		return s, err
	}
	s.HTML = html.String()
	doc := gm.Parser().Parse(text.NewReader(md))
	err := ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *east.Table:
			t := Table{}
			for c := n.FirstChild(); c != nil; c = c.NextSibling() {
				switch c := c.(type) {
				case *east.TableHeader:
					t.HeaderCells = c.ChildCount()
				case *east.TableRow:
					t.Rows++
				}
			}
			s.Tables = append(s.Tables, t)
		case *ast.List:
			if n.IsOrdered() {
				for item := n.FirstChild(); item != nil; item = item.NextSibling() {
					nested := 0
					for c := item.FirstChild(); c != nil; c = c.NextSibling() {
						if l, ok := c.(*ast.List); ok && !l.IsOrdered() {
							nested += l.ChildCount()
						}
					}
					s.OrderedItems = append(s.OrderedItems, nested)
				}
			}
		case *ast.Paragraph:
			if p := string(n.Lines().Value(md)); strings.Count(strings.TrimRight(p, "\n"), "\n") > 0 {
				s.RunOn = append(s.RunOn, p)
			}
		}
		return ast.WalkContinue, nil
	})
	return s, err
}

// TableAndNotes checks the shape of compare's markdown: one table with a
// header cell per column (and one for the scenario) and a row per scenario,
// one numbered note per scenario with a nested item per column, and no
// run-on paragraph. It returns the problems found.
func (s Structure) TableAndNotes(scenarios, columns int) []string {
	var problems []string
	if len(s.Tables) != 1 || s.Tables[0].Rows != scenarios || s.Tables[0].HeaderCells != columns+1 {
		problems = append(problems, fmt.Sprintf("tables %+v; want one with %d rows and %d header cells", s.Tables, scenarios, columns+1))
	}
	if len(s.OrderedItems) != scenarios {
		problems = append(problems, fmt.Sprintf("%d numbered notes, want one per scenario (%d)", len(s.OrderedItems), scenarios))
	}
	for i, n := range s.OrderedItems {
		if n != columns {
			problems = append(problems, fmt.Sprintf("note %d has %d column items, want %d", i+1, n, columns))
		}
	}
	for _, p := range s.RunOn {
		problems = append(problems, "a paragraph of several lines (run-on text): "+p)
	}
	return problems
}

// Check parses md and checks it with TableAndNotes; the error lists the
// problems and the rendered HTML.
func Check(md []byte, scenarios, columns int) error {
	s, err := Parse(md)
	if err != nil {
		return err
	}
	if problems := s.TableAndNotes(scenarios, columns); len(problems) > 0 {
		return fmt.Errorf("the markdown does not render as intended:\n%s\n%s", strings.Join(problems, "\n"), s.HTML)
	}
	return nil
}

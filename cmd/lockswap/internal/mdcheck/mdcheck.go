// Package mdcheck renders markdown as CommonMark with GitHub tables (with
// goldmark) and reports its structure, so that tests can check that
// generated markdown renders as intended: a table, a numbered list of
// notes, no paragraph that runs several lines together. Only tests import
// it.
package mdcheck

import (
	"bytes"
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

package experiments

import (
	"bytes"
	"fmt"
	"strings"
	"text/tabwriter"
)

// Table is a run's results table, built row by row. Every cell names its
// column where its value is set, so a row cannot leave a column out, add
// one, or put one in another place: the first row fixes the columns and
// Row panics on a row that differs (a programming error, which the quick
// runs of the tests reach). The rows are results.csv, results.json's rows
// and report.html's results table (Results.Columns and Rows); the cells
// with a heading (Cell.Show) are the terminal table (Results.Table, also
// report.md's), in their order. A Table knows nothing of what it holds.
type Table struct {
	cells []Cell     // the first row's cells: the columns
	rows  [][]string // CSV values
	text  [][]string // terminal cells
}

// Cell is one value of a row: Key is its results.csv column ("" for a
// terminal-only cell), Value its CSV value; Head, when set, puts it in the
// terminal table under that heading, as Text.
type Cell struct {
	Key, Value string
	Head, Text string
}

// C is the cell of column key holding value.
func C(key, value string) Cell { return Cell{Key: key, Value: value} }

// Show puts c in the terminal table too: text under heading head.
func (c Cell) Show(head, text string) Cell {
	c.Head, c.Text = head, text
	return c
}

// Shown is a cell of the terminal table only (no results.csv column).
func Shown(head, text string) Cell { return Cell{Head: head, Text: text} }

// Row adds a row. It panics when the row's columns (keys and headings, in
// order) are not the first row's.
func (t *Table) Row(cells ...Cell) {
	if len(t.rows) == 0 && t.cells == nil {
		t.cells = cells
	} else if err := sameColumns(t.cells, cells); err != nil {
		panic(fmt.Sprintf("experiments: results row %d: %v", len(t.rows)+1, err))
	}
	var row, text []string
	for _, c := range cells {
		if c.Key != "" {
			row = append(row, c.Value)
		}
		if c.Head != "" {
			text = append(text, c.Text)
		}
	}
	t.rows = append(t.rows, row)
	t.text = append(t.text, text)
}

// sameColumns says how row's columns differ from want's, nil if they don't.
func sameColumns(want, row []Cell) error {
	for i := 0; i < max(len(want), len(row)); i++ {
		switch {
		case i >= len(row):
			return fmt.Errorf("column %s missing", want[i].name())
		case i >= len(want):
			return fmt.Errorf("column %s is not in the table", row[i].name())
		case want[i].Key != row[i].Key || want[i].Head != row[i].Head:
			return fmt.Errorf("column %d is %s, want %s", i+1, row[i].name(), want[i].name())
		}
	}
	return nil
}

// name is the cell's column for errors: its key and its heading.
func (c Cell) name() string {
	switch {
	case c.Key == "":
		return fmt.Sprintf("(terminal) %q", c.Head)
	case c.Head != "":
		return fmt.Sprintf("%q (shown as %q)", c.Key, c.Head)
	}
	return fmt.Sprintf("%q", c.Key)
}

// Columns are results.csv's columns.
func (t *Table) Columns() []string {
	var cols []string
	for _, c := range t.cells {
		if c.Key != "" {
			cols = append(cols, c.Key)
		}
	}
	return cols
}

// Rows are results.csv's rows.
func (t *Table) Rows() [][]string { return t.rows }

// Text is the terminal table, aligned; "" when no cell has a heading.
func (t *Table) Text() string {
	var head []string
	for _, c := range t.cells {
		if c.Head != "" {
			head = append(head, c.Head)
		}
	}
	if len(head) == 0 {
		return ""
	}
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, r := range t.text {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
	return b.String()
}

// Row adds a row to r's table (Table.Row) and makes the table r's
// Columns and Rows.
func (r *Results) Row(cells ...Cell) {
	r.table.Row(cells...)
	r.Columns, r.Rows = r.table.Columns(), r.table.Rows()
}

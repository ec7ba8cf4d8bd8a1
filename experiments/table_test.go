package experiments

import (
	"strings"
	"testing"
)

// A row's cells name their columns, so a row that leaves one out, adds
// one or moves one is caught where it is added; the rows are the CSV
// columns and rows, the shown cells the terminal table.
func TestTableRows(t *testing.T) {
	row := func(tab *Table, cells ...Cell) (msg string) {
		defer func() {
			if r := recover(); r != nil {
				msg = r.(string)
			}
		}()
		tab.Row(cells...)
		return ""
	}
	var tab Table
	row(&tab, C("a", "1").Show("A", "one"), C("b", "2"), Shown("c (µs)", "0.5"))
	for _, tc := range []struct {
		cells []Cell
		want  string
	}{
		{[]Cell{C("a", "1").Show("A", "one"), C("b", "2")}, `column (terminal) "c (µs)" missing`},
		{[]Cell{C("a", "1").Show("A", "one"), C("b", "2"), Shown("c (µs)", "0.5"), C("d", "4")}, `column "d" is not in the table`},
		{[]Cell{C("b", "2"), C("a", "1").Show("A", "one"), Shown("c (µs)", "0.5")}, `column 1 is "b", want "a" (shown as "A")`},
		{[]Cell{C("a", "1"), C("b", "2"), Shown("c (µs)", "0.5")}, `column 1 is "a", want "a" (shown as "A")`}, // not shown
	} {
		if got := row(&tab, tc.cells...); !strings.Contains(got, tc.want) || !strings.Contains(got, "results row 2") {
			t.Errorf("row %v: panic %q, want %q", tc.cells, got, tc.want)
		}
	}
	if msg := row(&tab, C("a", "10").Show("A", "ten"), C("b", "20"), Shown("c (µs)", "5")); msg != "" {
		t.Fatal(msg)
	}
	if got := strings.Join(tab.Columns(), ","); got != "a,b" {
		t.Errorf("columns %s", got)
	}
	if got := tab.Rows(); len(got) != 2 || strings.Join(got[1], ",") != "10,20" {
		t.Errorf("rows %q", got)
	}
	if got, want := tab.Text(), "A    c (µs)\none  0.5\nten  5\n"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	var r Results
	r.Row(C("x", "1"))
	r.Row(C("x", "2"))
	if strings.Join(r.Columns, ",") != "x" || len(r.Rows) != 2 || r.Table != "" {
		t.Errorf("Results.Row: %q %q %q", r.Columns, r.Rows, r.Table)
	}
}

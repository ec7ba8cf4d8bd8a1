package roce

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs every test with checkInvariants after each step; a
// benchmark run keeps production's setting (off) so that it measures what
// production runs.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		debugInvariants = true
	}
	os.Exit(m.Run())
}

// dcqcnState returns q's reaction point, which must be DCQCN.
func (q *QP) dcqcnState() *dcqcn { return q.cc.(*dcqcn) }

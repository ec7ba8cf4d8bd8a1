package roce

// lineRate is congestion control "none": the QP always sends at the port's
// rate and ignores every signal.
type lineRate struct {
	bps  int64
	line float64 // float64(bps), the pacing rate
}

func newLineRate(bps int64) *lineRate { return &lineRate{bps: bps, line: float64(bps)} }

func (l *lineRate) rate(int64) float64          { return l.line }
func (l *lineRate) rateBps() int64              { return l.bps }
func (l *lineRate) onSent(int)                  {}
func (l *lineRate) onCNP(int64)                 {}
func (l *lineRate) onRTT(int64, uint64, uint64) {}

package config

// The package's schema.go has a var named units, hence the name unit.
import unit "github.com/vcluster/vcluster/units"

// ParseSpeed parses a link speed into bits/s: units.ParseSpeed ("100G",
// "400Gbps", "25000M", "1.6T"; a bare number is an error suggesting a
// unit). It accepts "0G"; Validate rejects speeds outside
// MinLinkBps..MaxLinkBps.
func ParseSpeed(s string) (uint64, error) { return unit.ParseSpeed(s) }

// FormatSpeed renders bits/s in the shortest exact form ParseSpeed reads
// back: units.FormatSpeed (100e9 → "100G", 1500 → "1.5k", 999 → "999bps").
func FormatSpeed(bps uint64) string { return unit.FormatSpeed(bps) }

// isDecimal reports whether s is a bare number as ParseSpeed reads it
// (units.IsDecimal); unitHint uses it.
func isDecimal(s string) bool { return unit.IsDecimal(s) }

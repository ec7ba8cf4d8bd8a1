package config

import (
	"strings"
	"testing"
)

// A RoCE preset name that was given up is refused with one error that
// says what it meant, names its successor and lists the allowed names; it
// never silently selects another preset.
func TestRoCERenamedPresetRefused(t *testing.T) {
	for old, why := range RoCERenamedCCPresets {
		_, err := Load("", []string{"transport.roce.cc=" + old})
		if err == nil {
			t.Fatalf("transport.roce.cc=%s accepted", old)
		}
		fes := fieldErrors(t, err)
		if len(fes) != 1 || fes[0].Path != "transport.roce.cc" {
			t.Fatalf("%s: errors %v, want one on transport.roce.cc", old, err)
		}
		msg := err.Error()
		for _, s := range append([]string{why}, RoCECCPresets...) {
			if !strings.Contains(msg, s) {
				t.Errorf("%s: %q does not say %q", old, msg, s)
			}
		}
	}
	for _, n := range RoCECCPresets {
		if _, ok := RoCERenamedCCPresets[n]; ok {
			t.Errorf("%q is both a preset and renamed", n)
		}
		if _, err := Load("", []string{"transport.kind=roce", "transport.roce.cc=" + n}); err != nil {
			t.Errorf("transport.roce.cc=%s: %v", n, err)
		}
	}
}

// transport.roce.irnBDPFactor defaults to the IRN paper's 1 BDP; 0 (off)
// and [0.25, 16] are accepted, anything else refused with the range.
func TestRoCEIRNBDPFactor(t *testing.T) {
	if f := Default().Transport.RoCE.IRNBDPFactor; f != 1 {
		t.Fatalf("default irnBDPFactor %v, want 1 (the IRN paper's cap)", f)
	}
	for _, ok := range []string{"0", "0.25", "1", "2", "16"} {
		if _, err := Load("", []string{"transport.roce.irnBDPFactor=" + ok}); err != nil {
			t.Errorf("irnBDPFactor=%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"-1", "0.2", "16.5", "NaN"} {
		_, err := Load("", []string{"transport.roce.irnBDPFactor=" + bad})
		if err == nil {
			t.Errorf("irnBDPFactor=%s accepted", bad)
			continue
		}
		if fes := fieldErrors(t, err); len(fes) != 1 || fes[0].Path != "transport.roce.irnBDPFactor" || !strings.Contains(err.Error(), "16") {
			t.Errorf("irnBDPFactor=%s: %v", bad, err)
		}
	}
}

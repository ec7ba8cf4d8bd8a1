// Package tshark is a test helper that runs Wireshark's tshark on capture
// files written by the simulator, so tests can assert that a real,
// independent dissector decodes the bytes on the simulated wire.
//
// Tests call Require (or Fields/Verbose, which call it) and are skipped with
// a clear message when tshark is not installed. CI installs it in .ci/run.
package tshark

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// SkipMessage is the reason given to t.Skip when tshark is missing.
const SkipMessage = "tshark not installed: apt-get install tshark (CI installs it in .ci/run)"

// DecodeRoCEv2 are extra tshark arguments forcing UDP port 4791 to be
// dissected as RoCEv2 (InfiniBand). tshark 4.x already does this by default;
// the option is kept for builds where the port preference was changed.
var DecodeRoCEv2 = []string{"-d", "udp.port==4791,infiniband"}

// CheckUDPChecksum are extra tshark arguments enabling UDP checksum
// validation (off by default), so udp.checksum.status is 1 (good) or 0 (bad)
// instead of 2 (unverified).
var CheckUDPChecksum = []string{"-o", "udp.check_checksum:TRUE"}

// IgnoreIPv6ZeroChecksum are extra tshark arguments accepting a zero UDP
// checksum over IPv6. vcluster's RoCEv2 and MRC frames carry checksum 0, as
// RoCEv2 NICs send (the endpoint package doc says why); without this tshark
// flags every such frame "Illegal checksum value (0)" with error severity.
var IgnoreIPv6ZeroChecksum = []string{"-o", "udp.ignore_ipv6_zero_checksum:TRUE"}

// Lua returns the tshark arguments loading the Lua plugin script (e.g.
// tools/wireshark/mrc.lua).
func Lua(script string) []string { return []string{"-X", "lua_script:" + script} }

// Expert-info severities as tshark prints the field _ws.expert.severity.
const (
	SeverityNote  = "4194304" // PI_NOTE
	SeverityWarn  = "6291456" // PI_WARN
	SeverityError = "8388608" // PI_ERROR
)

// runTimeout bounds one tshark run.
const runTimeout = 2 * time.Minute

// Path returns the path of the tshark binary found on PATH.
func Path() (string, bool) {
	p, err := exec.LookPath("tshark")
	if err != nil {
		return "", false
	}
	return p, true
}

// Require returns the path of tshark, or skips the test with SkipMessage
// when it is not installed.
func Require(t testing.TB) string {
	t.Helper()
	p, ok := Path()
	if !ok {
		t.Skip(SkipMessage)
	}
	return p
}

// Run runs tshark with the given arguments and returns its standard output.
// Name resolution is always disabled (-n). The test fails if tshark exits
// with an error; its standard error is included in the failure message.
func Run(t testing.TB, args ...string) string {
	t.Helper()
	bin := Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	full := append([]string{"-n"}, args...)
	cmd := exec.CommandContext(ctx, bin, full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tshark %s: %v\nstderr:\n%s", strings.Join(full, " "), err, stderr.String())
	}
	return stdout.String()
}

// Fields runs
//
//	tshark -n -r pcapFile -T fields -E separator=/t [-Y displayFilter] -e f1 -e f2 ...
//
// and returns one row per packet that passes the display filter (all packets
// when displayFilter is empty), each row holding one string per field. A field
// absent from a packet is the empty string; a field occurring several times
// in one packet (e.g. ipv6.src of IPv6-in-IPv6) has its values joined by
// commas.
func Fields(t testing.TB, pcapFile string, displayFilter string, fields ...string) [][]string {
	t.Helper()
	return FieldsArgs(t, pcapFile, nil, displayFilter, fields...)
}

// FieldsArgs is Fields with extra tshark arguments placed before the field
// list, e.g. DecodeRoCEv2 or "-o", "pref:value".
func FieldsArgs(t testing.TB, pcapFile string, extra []string, displayFilter string, fields ...string) [][]string {
	t.Helper()
	if len(fields) == 0 {
		t.Fatal("tshark.Fields: no fields requested")
	}
	args := []string{"-r", pcapFile}
	args = append(args, extra...)
	args = append(args, "-T", "fields", "-E", "separator=/t")
	if displayFilter != "" {
		args = append(args, "-Y", displayFilter)
	}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out := Run(t, args...)
	var rows [][]string
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\r\n")
		row := strings.Split(line, "\t")
		if len(row) != len(fields) {
			t.Fatalf("tshark.Fields: got %d columns, want %d, in line %q", len(row), len(fields), line)
		}
		rows = append(rows, row)
	}
	return rows
}

// Verbose returns the full packet-detail dissection (tshark -n -r FILE -V),
// handy for t.Log when an assertion fails.
func Verbose(t testing.TB, pcapFile string) string {
	t.Helper()
	return VerboseArgs(t, pcapFile, nil, "")
}

// VerboseArgs is Verbose with extra tshark arguments (e.g. Lua) and a
// display filter (none when empty).
func VerboseArgs(t testing.TB, pcapFile string, extra []string, displayFilter string) string {
	t.Helper()
	args := append([]string{"-r", pcapFile}, extra...)
	if displayFilter != "" {
		args = append(args, "-Y", displayFilter)
	}
	return Run(t, append(args, "-V")...)
}

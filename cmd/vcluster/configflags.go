package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vcluster/vcluster/config"
)

// Shorthand flags (--hosts, --preset, --transport, --elide) set config
// fields, some of which derive others (--hosts sets fabric.hosts, from
// which fabric.t0PerPlane follows). A config error on such a field is
// reported against the flag the user typed, with what the flag may be
// for this configuration, not against a field they never wrote.

// shorthandFields are the config fields each shorthand flag decides.
var shorthandFields = map[string][]string{
	"hosts":     {"fabric.hosts", "fabric.t0PerPlane", "fabric.t1PerPlane"},
	"preset":    {"fabric.preset"},
	"transport": {"transport.kind"},
	"elide":     {"transport.payload"},
}

// flagConfigError rewrites the config errors in err (from loadConfigLayers)
// that belong to a shorthand flag cmd was given, naming the flag and its
// value first; other problems are kept as they are.
func flagConfigError(cmd *cobra.Command, err error) error {
	all := flatten(err)
	var lines []string
	rewrote := false
	hostsDone := false
	for _, e := range all {
		var fe *config.FieldError
		if !errors.As(e, &fe) {
			lines = append(lines, e.Error())
			continue
		}
		flag := ""
		for name, fields := range shorthandFields {
			if f := cmd.Flags().Lookup(name); f != nil && f.Changed && slices.Contains(fields, fe.Path) {
				flag = name
			}
		}
		if flag == "" {
			lines = append(lines, e.Error())
			continue
		}
		rewrote = true
		v := cmd.Flags().Lookup(flag).Value.String()
		switch flag {
		case "hosts":
			if hostsDone {
				continue // one line for --hosts: the derived fields say the same
			}
			hostsDone = true
			lines = append(lines, fmt.Sprintf("--hosts: %s is not possible here (%v); %s", v, fe, hostsRange(cmd)))
		default:
			lines = append(lines, fmt.Sprintf("--%s: %s: %v", flag, v, fe))
		}
	}
	if !rewrote {
		return err
	}
	return errors.New("invalid command line:\n" + strings.Join(lines, "\n"))
}

// flatten returns the leaves of err's wrapped and joined errors that
// carry a *config.FieldError, or err itself.
func flatten(err error) []error {
	var out []error
	var walk func(error)
	walk = func(e error) {
		switch x := e.(type) {
		case interface{ Unwrap() []error }:
			for _, y := range x.Unwrap() {
				walk(y)
			}
		case *config.FieldError:
			out = append(out, x)
		case interface{ Unwrap() error }:
			if u := x.Unwrap(); u != nil {
				walk(u)
			} else {
				out = append(out, e)
			}
		default:
			out = append(out, e)
		}
	}
	walk(err)
	return out
}

// hostsRange says what --hosts may be for cmd's configuration: a multiple
// of fabric.hostsPerT0 up to the largest that validates (found by
// bisection over config.Build, which is cheap: nothing is simulated).
func hostsRange(cmd *cobra.Command) string {
	path, sets, err := configSources(cmd)
	if err != nil {
		return ""
	}
	var rest []string
	for _, s := range sets {
		if k, _, _ := strings.Cut(s, "="); strings.TrimSpace(k) != "fabric.hosts" {
			rest = append(rest, s)
		}
	}
	// The file is read once for the whole bisection.
	doc := configDoc(path)
	if _, err := expSectionParams(doc); err != nil {
		return ""
	}
	base, err := config.Build(config.Layers{File: doc, Sets: rest})
	if err != nil {
		return ""
	}
	per := max(base.Fabric.HostsPerT0, 1)
	ok := func(m int) bool {
		_, err := config.Build(config.Layers{File: doc, Sets: append(slices.Clip(rest), "fabric.hosts="+strconv.Itoa(m*per))})
		return err == nil
	}
	if !ok(1) {
		return fmt.Sprintf("must be a multiple of %d (fabric.hostsPerT0) for this configuration", per)
	}
	lo, hi := 1, maxFlagHosts/per+1 // ok(lo), and hi is beyond any limit
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return fmt.Sprintf("must be a multiple of %d (fabric.hostsPerT0) in [%d, %d] for this configuration", per, per, lo*per)
}

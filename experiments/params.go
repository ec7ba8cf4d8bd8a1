package experiments

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vcluster/vcluster/units"
)

// CheckParams reads env.Params for e as its run will (Experiment.Args), running
// nothing, so the CLI can refuse a bad exp.* value before it creates the
// report directory; every bad parameter is one error of the joined
// result, naming exp.<key>, the value, the reason and the allowed range.
func CheckParams(e *Experiment, env *Env) error {
	_, err := e.Args.bind(env)
	return err
}

// Bounds of the parameter kinds. They are about what a value can mean,
// not about what fits in memory (the CLI estimates that separately).
const (
	maxParamBytes = 1 << 40 // 1 TiB: any single size or transfer
	maxParamQPs   = 64      // transport.qpsPerConnection's bound
	// maxParamDuration bounds virtual-time parameters: an hour of virtual
	// time is far beyond any experiment's design and keeps sums of them
	// well inside sim.Time.
	maxParamDuration = time.Hour
)

// paramReader reads an experiment's parameters, collecting every problem
// (not only the first) as "exp.<key>: <value> <reason>; must be <range>".
type paramReader struct {
	p    map[string]string
	errs []error
}

func newParamReader(env *Env) *paramReader { return &paramReader{p: env.Params} }

func (r *paramReader) bad(key, format string, a ...any) {
	r.errs = append(r.errs, fmt.Errorf("exp.%s: %s", key, fmt.Sprintf(format, a...)))
}

// err is the joined problems, nil when there were none.
func (r *paramReader) err() error { return errors.Join(r.errs...) }

func (r *paramReader) list(key string) []string {
	fs := strings.Split(r.p[key], ",")
	for i := range fs {
		fs[i] = strings.TrimSpace(fs[i])
	}
	return fs
}

const bytesRange = "a size in [1, 1T] bytes (e.g. 4096, 64K, 1M, 1G, 1T)"

// parseParamBytes reads one size (collectives.ParseSize: K, M, G or T,
// powers of 1024) in [1, 1T].
func parseParamBytes(s string) (uint64, bool) {
	v, err := units.ParseSize(s)
	if err != nil || v == 0 || v > maxParamBytes {
		return 0, false
	}
	return v, true
}

// size reads one size in [1, 1T].
func (r *paramReader) size(key string) uint64 {
	v, ok := parseParamBytes(r.p[key])
	if !ok {
		r.bad(key, "%q is not a size; must be %s", r.p[key], bytesRange)
	}
	return v
}

// sizes reads a comma-separated list of sizes, sorted ascending, repeats
// dropped.
func (r *paramReader) sizes(key string) []uint64 {
	var out []uint64
	for _, f := range r.list(key) {
		v, ok := parseParamBytes(f)
		if !ok {
			r.bad(key, "%q is not a size; must be a comma-separated list of %ss", f, bytesRange)
			return nil
		}
		out = append(out, v)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// losses reads a comma-separated list of loss rates in [0, 1).
func (r *paramReader) losses(key string) []float64 {
	var out []float64
	for _, f := range r.list(key) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || math.IsNaN(v) || v < 0 || v >= 1 {
			r.bad(key, "%s is not a loss rate; must be in [0, 1)", strconv.Quote(f))
			return nil
		}
		if slices.Contains(out, v) {
			r.bad(key, "%s is listed twice; each value is one point of the run", strconv.Quote(f))
			return nil
		}
		out = append(out, v)
	}
	return out
}

// integer reads one integer in [lo, hi]; why, if not empty, says what the
// range comes from.
func (r *paramReader) integer(key string, lo, hi int, why string) int {
	v, err := strconv.Atoi(strings.TrimSpace(r.p[key]))
	if err != nil || v < lo || v > hi {
		if why != "" {
			why = " (" + why + ")"
		}
		r.bad(key, "%q is out of range; must be an integer in [%d, %d]%s", r.p[key], lo, hi, why)
	}
	return v
}

// number is key's value as a real number in [lo, hi].
func (r *paramReader) number(key string, lo, hi float64) float64 {
	v, err := strconv.ParseFloat(r.p[key], 64)
	if err != nil || math.IsNaN(v) || v < lo || v > hi {
		r.bad(key, "%q must be a number in [%g, %g]", r.p[key], lo, hi)
	}
	return v
}

// integers reads a comma-separated list of integers in [lo, hi].
func (r *paramReader) integers(key string, lo, hi int) []int {
	var out []int
	for _, f := range r.list(key) {
		v, err := strconv.Atoi(f)
		if err != nil || v < lo || v > hi {
			r.bad(key, "%q is out of range; must be a comma-separated list of integers in [%d, %d]", f, lo, hi)
			return nil
		}
		if slices.Contains(out, v) {
			r.bad(key, "%q is listed twice; each value is one point of the run", f)
			return nil
		}
		out = append(out, v)
	}
	return out
}

// duration reads a virtual-time duration in (0, 1h], or [0, 1h] with
// zeroOK.
func (r *paramReader) duration(key string, zeroOK bool) time.Duration {
	d, err := units.ParseDuration(r.p[key])
	lo := "(0"
	if zeroOK {
		lo = "[0"
	}
	if err != nil || strings.TrimSpace(r.p[key]) == "" || d < 0 || (d == 0 && !zeroOK) || d > maxParamDuration {
		r.bad(key, "%q is out of range; must be a duration in %s, 1h] (e.g. 300us, 2ms, 1s)", r.p[key], lo)
	}
	return d
}

// durations reads several positive durations.
func (r *paramReader) durations(keys ...string) []time.Duration {
	out := make([]time.Duration, len(keys))
	for i, k := range keys {
		out[i] = r.duration(k, false)
	}
	return out
}

// choice reads one of allowed.
func (r *paramReader) choice(key string, allowed ...string) string {
	v := r.p[key]
	if !slices.Contains(allowed, v) {
		r.bad(key, "%q is not allowed; must be one of %s", v, strings.Join(allowed, ", "))
	}
	return v
}

// PayloadBytesPerHost is the registered memory (source, destination and
// scratch buffers) one host needs at e's largest point (Typed.Payload): 0
// when every point elides the payload, or when env.Params are not valid
// (CheckParams says why).
func PayloadBytesPerHost(e *Experiment, env *Env) uint64 {
	b, err := e.Args.bind(env)
	if err != nil {
		return 0
	}
	return b.payload
}

// collectiveBuffers is what one rank registers for a collective of
// nccl-tests size b: send, receive and scratch buffers of up to b each.
func collectiveBuffers(b uint64) uint64 { return 3 * b }

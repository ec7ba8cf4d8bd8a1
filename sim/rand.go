package sim

import (
	"math/rand/v2"

	"github.com/vcluster/vcluster/internal/rng"
)

// StreamSeed derives the seed of the stream named name from the run seed.
// It depends only on (seed, name), so adding a component never changes the
// draws of another.
func StreamSeed(seed uint64, name string) uint64 { return rng.StreamSeed(seed, name) }

// NewStream returns the random stream of component name under run seed.
func NewStream(seed uint64, name string) *rand.Rand { return rng.NewStream(seed, name) }

// Rand returns a new random stream for the named component, derived from
// the loop's run seed. Call it once per component and keep the result.
func (l *Loop) Rand(name string) *rand.Rand { return NewStream(l.seed, name) }

// Hash64 mixes x with a seed: a cheap, well-distributed hash for fast
// decisions (ECMP, Bernoulli draws keyed by packet) that must not consume a
// stream.
func Hash64(seed, x uint64) uint64 { return rng.Hash64(seed, x) }

// FastRand is an 8-byte random stream (splitmix64) for components that
// exist by the million (ports, links) and draw per packet.
type FastRand = rng.Fast

// NewFastRand returns the fast stream of component name under run seed.
func NewFastRand(seed uint64, name string) FastRand { return rng.NewFast(StreamSeed(seed, name)) }

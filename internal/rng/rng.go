// Package rng is vcluster's one source of seeded randomness: the splitmix64
// mixer, the cheap splitmix64 stream components draw from per packet, and
// the PCG streams of math/rand/v2. Everything random in a run derives from
// the run's seed through here, so the same seed gives the same run. It
// knows no clock and no component.
package rng

import "math/rand/v2"

// Mix is the splitmix64 finaliser applied to x + golden gamma: a strong
// 64-bit mixer, used to derive seeds and to hash keys.
func Mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// StreamSeed derives the seed of the stream named name from the run seed.
// It depends only on (seed, name), so adding a component never changes the
// draws of another.
func StreamSeed(seed uint64, name string) uint64 {
	h := uint64(14695981039346656037) // FNV-1a over the name
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return Mix(seed ^ Mix(h))
}

// Hash64 mixes x with a seed: a cheap, well-distributed hash for decisions
// keyed by a packet or flow that must not consume a stream.
func Hash64(seed, x uint64) uint64 { return Mix(seed ^ Mix(x)) }

// Fast is an 8-byte splitmix64 stream for components that exist by the
// million (ports, links, QPs) and draw per packet.
type Fast struct{ s uint64 }

// NewFast returns the stream whose state starts at seed. Seed it from
// StreamSeed (or another derived seed) so it stays independent.
func NewFast(seed uint64) Fast { return Fast{seed} }

// Uint64 returns the next 64 random bits.
func (r *Fast) Uint64() uint64 {
	r.s += 0x9e3779b97f4a7c15
	x := r.s
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Float64 returns a uniform value in [0, 1).
func (r *Fast) Float64() float64 { return float64(r.Uint64()>>11) / (1 << 53) }

// NewPCG returns a math/rand/v2 generator over PCG seeded with (seed, stream):
// for components that need the full rand.Rand API (permutations, normals).
func NewPCG(seed, stream uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, stream)) }

// NewStream returns the PCG stream of component name under run seed.
func NewStream(seed uint64, name string) *rand.Rand {
	s := StreamSeed(seed, name)
	return NewPCG(s, Mix(s))
}

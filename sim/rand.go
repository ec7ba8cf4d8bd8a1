package sim

import "math/rand/v2"

// splitmix64 is a strong 64-bit mixer, used to derive stream seeds.
func splitmix64(x uint64) uint64 {
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
	return splitmix64(seed ^ splitmix64(h))
}

// NewStream returns the random stream of component name under run seed.
func NewStream(seed uint64, name string) *rand.Rand {
	s := StreamSeed(seed, name)
	return rand.New(rand.NewPCG(s, splitmix64(s)))
}

// Rand returns a new random stream for the named component, derived from
// the loop's run seed. Call it once per component and keep the result.
func (l *Loop) Rand(name string) *rand.Rand { return NewStream(l.seed, name) }

// Hash64 mixes x with a seed: a cheap, well-distributed hash for fast
// decisions (ECMP, Bernoulli draws keyed by packet) that must not consume a
// stream.
func Hash64(seed, x uint64) uint64 { return splitmix64(seed ^ splitmix64(x)) }

// FastRand is an 8-byte random stream (splitmix64) for components that
// exist by the million (ports, links) and draw per packet. Seed it from
// StreamSeed so it stays independent of every other stream.
type FastRand struct{ s uint64 }

// NewFastRand returns the fast stream of component name under run seed.
func NewFastRand(seed uint64, name string) FastRand { return FastRand{StreamSeed(seed, name)} }

// Uint64 returns the next 64 random bits.
func (r *FastRand) Uint64() uint64 {
	r.s += 0x9e3779b97f4a7c15
	x := r.s
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Float64 returns a uniform value in [0, 1).
func (r *FastRand) Float64() float64 { return float64(r.Uint64()>>11) / (1 << 53) }

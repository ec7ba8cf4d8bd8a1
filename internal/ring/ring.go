// Package ring is the one growable FIFO the transports and the NIC engine
// share. It owns nothing but its storage; it knows no packet or clock.
package ring

// Ring is a growable FIFO over a power-of-two circular buffer. It allocates
// only when it grows, so a queue that reaches its working size stops
// allocating. The zero value is an empty ring. Popped slots are zeroed so a
// ring of pointers does not keep garbage alive.
type Ring[T any] struct {
	buf  []T
	head int
	n    int
}

// Len returns the number of queued elements.
func (r *Ring[T]) Len() int { return r.n }

// Push appends v at the back.
func (r *Ring[T]) Push(v T) {
	if r.n == len(r.buf) {
		nb := make([]T, max(16, 2*len(r.buf)))
		for i := 0; i < r.n; i++ {
			nb[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = v
	r.n++
}

// Front returns the oldest element in place; the ring must not be empty.
func (r *Ring[T]) Front() *T { return &r.buf[r.head] }

// At returns the i-th oldest element in place (0 is Front); 0 ≤ i < Len.
func (r *Ring[T]) At(i int) *T { return &r.buf[(r.head+i)&(len(r.buf)-1)] }

// Pop removes and returns the oldest element; the ring must not be empty.
func (r *Ring[T]) Pop() T {
	v := r.buf[r.head]
	var zero T
	r.buf[r.head] = zero
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return v
}

// Clear empties the ring, keeping its storage.
func (r *Ring[T]) Clear() {
	for i := 0; i < r.n; i++ {
		var zero T
		r.buf[(r.head+i)&(len(r.buf)-1)] = zero
	}
	r.head, r.n = 0, 0
}

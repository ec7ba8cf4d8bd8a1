// Package ib holds what RoCEv2 and MRC share of the InfiniBand transport
// layer: 24-bit PSN serial arithmetic and (codec.go) the BTH, RETH, AETH and
// ImmDt headers. It knows no QP, no fabric and no clock.
package ib

// PSNMask keeps the 24 bits of a packet sequence number.
const PSNMask = 1<<24 - 1

// PSNAdd returns a + n modulo 2^24 (n may be negative).
func PSNAdd(a uint32, n int) uint32 { return uint32(int64(a)+int64(n)) & PSNMask }

// PSNDiff returns a − b in 24-bit serial arithmetic: the signed distance in
// −2^23 .. 2^23−1, so a PSN just past a wrap compares after one just before.
func PSNDiff(a, b uint32) int { return int(int32((a-b)<<8) >> 8) }

// Package tunnel owns the frames a lab host's NIC ports and the lab fabric
// exchange over UDP: their byte layout (docs/lab-tunnel.md), their
// authentication (a per-host HMAC-SHA256 key derived from the lab's
// secret), the anti-replay window per stream, the drop reasons and their
// counters, and the batched UDP I/O that carries them.
//
// A frame is [header 32 bytes][payload][tag 16 bytes]. Seal builds one,
// Peek reads its header unauthenticated (to pick the key by host id),
// Open authenticates it, and Receiver does the whole receive path for one
// direction: peek, direction, window, tag, commit, counting every drop.
//
// It knows nothing of fabric packets, switches, hosts' stacks or the lab
// processes: a Data payload is opaque Ethernet bytes, a Hello payload an
// opaque digest. It reads no clock: a session number is the caller's
// (the sender's start time in Unix ns).
package tunnel

package fabric

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/vcluster/vcluster/ib/orderre"
	"github.com/vcluster/vcluster/sim"
)

// The programmable ToR of OrderRE (seed 004 §2.2, §3.1–3.3): a switch
// feature of T0 (edge) switches, switched on by Options.TorMulticast. The
// transports only set bits (package ib/orderre); this file is what a P4
// ToR would do with them.
//
// Group identity. A connection's group is keyed by what a ToR can hash
// from either direction's headers, in the switch's plane:
//
//	(sender host address, receiver host address, UDP source port)
//
// with the path field (bytes 8..9, docs/addressing.md) of both addresses
// cleared: a data packet gives (src, dst, sport), an ACK its mirror image
// (dst, src, sport). The transport echoes the data's entropy value in its
// ACKs, so the source port is the same both ways; the path field is
// cleared because the data goes to, and the ACK comes from, any of the
// receiver's path addresses.
//
// Sender ToR (the T0 a data packet enters from a host port):
//   - data with FlagCreate creates the group (an empty fast-path set),
//     FlagDelete deletes it;
//   - an ACK heading down to a local host with FlagRegister adds its source
//     address's path to the group's fast paths, FlagUnregister removes it;
//     an ACK (or an FReTx) for an unknown group creates it on demand (seed
//     §3.1.2), and every signal refreshes the group's idle clock;
//   - an FReTx from a host is replicated onto min(A, fast paths) distinct
//     fast paths (A = 0: all of them), each copy with its destination's
//     path field rewritten and forwarded as any frame is. The paths are
//     taken in registration order, rotating: a group's k-th FReTx starts
//     where the previous one stopped, so repeated repairs spread over the
//     fast set. No fast path: the FReTx goes as addressed.
//   - a group not refreshed for IdleTimeout ages out (a lost delete).
//
// Receiver ToR (the T0 delivering an FReTx to a local host): the first
// copy of (group, PSN) goes to the host, later ones within DedupWindow
// are dropped (counted as DropDuplicate on the ingress port and in
// Duplicates), so redundant copies do not add to an incast (seed §3.3).
//
// Only RoCEv2 frames (UDP to 4791, not encapsulated: ECMP and static
// forwarding, where path addresses route) are looked at; anything else
// passes untouched. Nothing here depends on Go map iteration order: the
// maps are only looked up, ageing walks a list kept in refresh order, and
// the dedup table evicts in insertion order.

// TorMulticastConfig sizes a programmable ToR's tables. Zero fields take
// the defaults (DefaultTorMulticast).
type TorMulticastConfig struct {
	// Groups bounds the multicast forwarding table (one entry per
	// connection whose sender is below the ToR); a create beyond it is
	// refused and counted (TableFull).
	Groups int
	// IdleTimeout ages out a group no signal refreshed for this long.
	IdleTimeout time.Duration
	// DedupEntries bounds the receiver side's (group, PSN) table; the
	// oldest entry is evicted first.
	DedupEntries int
	// DedupWindow is how long after the first copy of (group, PSN) later
	// copies count as duplicates.
	DedupWindow time.Duration
}

// Defaults and limits of TorMulticastConfig (config.FabricConfig's
// torMulticast section states the same ranges).
const (
	DefaultTorGroups       = 4096
	DefaultTorIdleTimeout  = time.Millisecond
	DefaultTorDedupEntries = 4096
	DefaultTorDedupWindow  = 100 * time.Microsecond
	MaxTorGroups           = 1 << 20
	MaxTorDedupEntries     = 1 << 20
	MinTorIdleTimeout      = time.Microsecond
	MaxTorIdleTimeout      = 10 * time.Second
	MinTorDedupWindow      = time.Microsecond
	MaxTorDedupWindow      = time.Second
	// MaxTorFastPaths bounds one group's fast-path set (a register beyond
	// it is ignored): orderre.MaxCopies + 1, more than any copy count asks.
	MaxTorFastPaths = orderre.MaxCopies + 1
)

// DefaultTorMulticast returns the defaults: 4096 groups and dedup entries
// (the seed sizes the table by active connections, §5.1: a few thousand
// per ToR), a 1 ms idle timeout (hundreds of RTTs of a leaf-spine, so only
// a connection that went quiet or lost its delete ages out) and a 100 µs
// dedup window (tens of RTTs: longer than the spread of one FReTx's copies
// across the fast paths, shorter than the next repair of the same PSN).
func DefaultTorMulticast() TorMulticastConfig {
	return TorMulticastConfig{Groups: DefaultTorGroups, IdleTimeout: DefaultTorIdleTimeout,
		DedupEntries: DefaultTorDedupEntries, DedupWindow: DefaultTorDedupWindow}
}

// withDefaults fills zero fields and checks the ranges.
func (c TorMulticastConfig) withDefaults() (TorMulticastConfig, error) {
	d := DefaultTorMulticast()
	if c.Groups == 0 {
		c.Groups = d.Groups
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = d.IdleTimeout
	}
	if c.DedupEntries == 0 {
		c.DedupEntries = d.DedupEntries
	}
	if c.DedupWindow == 0 {
		c.DedupWindow = d.DedupWindow
	}
	switch {
	case c.Groups < 1 || c.Groups > MaxTorGroups:
		return c, fmt.Errorf("torMulticast.groups: must be 1..%d, got %d", MaxTorGroups, c.Groups)
	case c.IdleTimeout < MinTorIdleTimeout || c.IdleTimeout > MaxTorIdleTimeout:
		return c, fmt.Errorf("torMulticast.idleTimeout: must be %v..%v, got %v", MinTorIdleTimeout, MaxTorIdleTimeout, c.IdleTimeout)
	case c.DedupEntries < 1 || c.DedupEntries > MaxTorDedupEntries:
		return c, fmt.Errorf("torMulticast.dedupEntries: must be 1..%d, got %d", MaxTorDedupEntries, c.DedupEntries)
	case c.DedupWindow < MinTorDedupWindow || c.DedupWindow > MaxTorDedupWindow:
		return c, fmt.Errorf("torMulticast.dedupWindow: must be %v..%v, got %v", MinTorDedupWindow, MaxTorDedupWindow, c.DedupWindow)
	}
	return c, nil
}

// TorMulticastCounters count one programmable ToR (or, summed, a fabric's:
// Topology.TorMulticastCounters).
type TorMulticastCounters struct {
	Groups      uint64 // groups in the table now (idle ones past their timeout excluded)
	Created     uint64 // by a create signal or on demand
	Deleted     uint64 // by a delete signal
	Aged        uint64 // idle past IdleTimeout
	TableFull   uint64 // creates refused: the table held Groups entries
	Registers   uint64 // fast paths added
	Unregisters uint64 // fast paths removed
	FReTx       uint64 // FReTx packets from local hosts
	Copies      uint64 // frames sent onto fast paths (the FReTx itself is one of them)
	Duplicates  uint64 // FReTx copies dropped at the receiver ToR
}

// Add adds o to c.
func (c *TorMulticastCounters) Add(o TorMulticastCounters) {
	c.Groups += o.Groups
	c.Created += o.Created
	c.Deleted += o.Deleted
	c.Aged += o.Aged
	c.TableFull += o.TableFull
	c.Registers += o.Registers
	c.Unregisters += o.Unregisters
	c.FReTx += o.FReTx
	c.Copies += o.Copies
	c.Duplicates += o.Duplicates
}

// torKey is a group's identity (see above).
type torKey struct {
	sender, receiver [16]byte
	sport            uint16
}

// torGroup is one multicast forwarding table entry.
type torGroup struct {
	key        torKey
	last       sim.Time // the last signal
	prev, next *torGroup
	n          uint8                   // fast paths in paths
	rot        uint8                   // where the next FReTx starts in paths
	paths      [MaxTorFastPaths]uint16 // path fields (path + 1), registration order
}

// dedupKey is one receiver-side entry: a group and a PSN.
type dedupKey struct {
	g   torKey
	psn uint32
}

type dedupEntry struct {
	key dedupKey
	at  sim.Time
}

// torMulticast is one switch's programmable-ToR state. Tables fill lazily
// (a fabric of thousands of T0s pays nothing until OrderRE traffic comes).
type torMulticast struct {
	cfg      TorMulticastConfig
	idle     sim.Time
	window   sim.Time
	groups   map[torKey]*torGroup
	old, new *torGroup // refresh order: old is the next to age out
	free     *torGroup // recycled entries (linked by next)
	dedup    map[dedupKey]int32
	ring     []dedupEntry // insertion order; ring[head] is the oldest once full
	head     int
	c        TorMulticastCounters // Groups unused: len(groups)
}

func newTorMulticast(cfg TorMulticastConfig) *torMulticast {
	return &torMulticast{cfg: cfg, idle: sim.Time(cfg.IdleTimeout), window: sim.Time(cfg.DedupWindow)}
}

// EnableTorMulticast makes s a programmable ToR with cfg (zero fields take
// the defaults) and resets its tables and counters. Options.TorMulticast
// does this for every T0 when the fabric is built.
func (s *Switch) EnableTorMulticast(cfg TorMulticastConfig) error {
	c, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	s.torm = newTorMulticast(c)
	s.tor = true
	return nil
}

// TorMulticastCounters returns s's programmable-ToR counters, and false
// when s is not one.
func (s *Switch) TorMulticastCounters() (TorMulticastCounters, bool) {
	if s.torm == nil {
		return TorMulticastCounters{}, false
	}
	return s.torm.counters(s.loop()), true
}

// TorMulticastCounters sums the programmable ToRs' counters, and reports
// whether the fabric has any.
func (t *Topology) TorMulticastCounters() (TorMulticastCounters, bool) {
	var sum TorMulticastCounters
	on := false
	for _, s := range t.Switches {
		if c, ok := s.TorMulticastCounters(); ok {
			sum.Add(c)
			on = true
		}
	}
	return sum, on
}

// loop is the loop driving s (its partition's: the ports are rebound).
func (s *Switch) loop() *sim.Loop {
	if len(s.Ports) == 0 {
		return nil
	}
	return s.Ports[0].loop
}

// counters reads the counters at now without changing anything: groups
// past their idle timeout are counted aged, as the next signal will.
func (m *torMulticast) counters(l *sim.Loop) TorMulticastCounters {
	c := m.c
	c.Groups = uint64(len(m.groups))
	if l != nil {
		now := l.Now()
		for g := m.old; g != nil && m.expired(g, now); g = g.next {
			c.Groups--
			c.Aged++
		}
	}
	return c
}

func (m *torMulticast) expired(g *torGroup, now sim.Time) bool { return now-g.last >= m.idle }

// Offsets of a plain (unencapsulated) RoCEv2 frame.
const (
	offUDPSport = offL4
	offUDPDport = offL4 + 2
	offBTH      = offL4 + UDPHeaderLen
)

// ingress is the ToR's look at a frame entering s on in, before it is
// forwarded. It reports whether it took the frame (replicated or dropped
// it); otherwise the caller forwards it.
func (m *torMulticast) ingress(s *Switch, p *Packet, in *Port) bool {
	d := p.Data
	if len(d) < offBTH || d[offIPv6+6] != ProtoUDP || binary.BigEndian.Uint16(d[offUDPDport:]) != RoCEv2Port {
		return false
	}
	sig := orderre.Read(d[offBTH:])
	if sig.Kind == orderre.KindOther {
		return false
	}
	toLocal := s.isLocal(d[offIPv6Dst : offIPv6Dst+16])
	now := in.loop.Now()
	switch sig.Kind {
	case orderre.KindData:
		if in.HostFacing && sig.Flags != 0 {
			k := dataKey(d)
			m.age(now)
			if sig.Flags&orderre.FlagCreate != 0 {
				m.touch(k, now)
			}
			if sig.Flags&orderre.FlagDelete != 0 {
				m.delete(k)
			}
			if sig.FReTx() {
				m.c.FReTx++
				m.replicate(s, p, in, m.touch(k, now), sig, toLocal, now)
				return true
			}
		}
		if toLocal && sig.FReTx() && m.duplicate(dataKey(d), sig.PSN, now) {
			m.c.Duplicates++
			in.drop(p, DropDuplicate)
			return true
		}
	case orderre.KindAck:
		if toLocal && sig.Flags&(orderre.FlagRegister|orderre.FlagUnregister) != 0 {
			m.age(now)
			g := m.touch(ackKey(d), now)
			path := binary.BigEndian.Uint16(d[offIPv6Src+8:])
			if g != nil && path != 0 {
				if sig.Flags&orderre.FlagRegister != 0 {
					m.register(g, path)
				} else {
					m.unregister(g, path)
				}
			}
		}
	}
	return false
}

// isLocal reports whether a (host or path) address is a host below s.
func (s *Switch) isLocal(a []byte) bool {
	plane, subnet, host, ok := ParseHostAddr(a)
	return ok && plane == s.Plane && subnet == s.localSubnet && host < len(s.hostPorts)
}

// dataKey is a data packet's group: (src, dst, sport), paths cleared.
func dataKey(d []byte) torKey { return connKey(d, offIPv6Src, offIPv6Dst) }

// ackKey is an ACK's group: its mirror image (dst, src, sport).
func ackKey(d []byte) torKey { return connKey(d, offIPv6Dst, offIPv6Src) }

// connKey is the group of the connection whose sender's address sits at
// offset sender of frame d and receiver's at receiver.
func connKey(d []byte, sender, receiver int) torKey {
	var k torKey
	copy(k.sender[:], d[sender:sender+16])
	copy(k.receiver[:], d[receiver:receiver+16])
	k.sender[8], k.sender[9], k.receiver[8], k.receiver[9] = 0, 0, 0, 0
	k.sport = binary.BigEndian.Uint16(d[offUDPSport:])
	return k
}

// age removes the groups idle past the timeout, oldest first.
func (m *torMulticast) age(now sim.Time) {
	for g := m.old; g != nil && m.expired(g, now); g = m.old {
		m.remove(g)
		m.c.Aged++
	}
}

// touch returns k's group refreshed at now, creating it if needed; nil
// when the table is full.
func (m *torMulticast) touch(k torKey, now sim.Time) *torGroup {
	g := m.groups[k]
	if g == nil {
		if len(m.groups) >= m.cfg.Groups {
			m.c.TableFull++
			return nil
		}
		if m.groups == nil {
			m.groups = make(map[torKey]*torGroup)
		}
		if g = m.free; g != nil {
			m.free = g.next
			*g = torGroup{}
		} else {
			g = new(torGroup)
		}
		g.key = k
		m.groups[k] = g
		m.c.Created++
	} else {
		m.unlink(g)
	}
	g.last = now
	// Append as the newest: the list stays in refresh order (now never
	// goes back), so ageing only ever looks at its head.
	g.prev = m.new
	if m.new != nil {
		m.new.next = g
	} else {
		m.old = g
	}
	m.new = g
	return g
}

func (m *torMulticast) delete(k torKey) {
	if g := m.groups[k]; g != nil {
		m.remove(g)
		m.c.Deleted++
	}
}

func (m *torMulticast) remove(g *torGroup) {
	m.unlink(g)
	delete(m.groups, g.key)
	g.next = m.free
	m.free = g
}

func (m *torMulticast) unlink(g *torGroup) {
	if g.prev != nil {
		g.prev.next = g.next
	} else {
		m.old = g.next
	}
	if g.next != nil {
		g.next.prev = g.prev
	} else {
		m.new = g.prev
	}
	g.prev, g.next = nil, nil
}

func (m *torMulticast) register(g *torGroup, path uint16) {
	for _, f := range g.paths[:g.n] {
		if f == path {
			return
		}
	}
	if int(g.n) == len(g.paths) {
		return // full: MaxTorFastPaths is more than any copy count uses
	}
	g.paths[g.n] = path
	g.n++
	m.c.Registers++
}

func (m *torMulticast) unregister(g *torGroup, path uint16) {
	for i, f := range g.paths[:g.n] {
		if f == path {
			copy(g.paths[i:], g.paths[i+1:g.n])
			g.n--
			if int(g.rot) > i {
				g.rot-- // keep the rotation on the path it was to take next
			}
			if g.rot >= g.n {
				g.rot = 0
			}
			m.c.Unregisters++
			return
		}
	}
}

// replicate sends the FReTx p onto min(A, fast paths) of g's fast paths
// (A = 0: all), or as addressed when g is nil or has none. The first copy
// is p itself; the others come from in's pool (its partition's), and each
// enters the fabric here (counted in in.Counters.Sent, as the frames a
// port generates are). Each copy takes the forwarding path of any frame.
func (m *torMulticast) replicate(s *Switch, p *Packet, in *Port, g *torGroup, sig orderre.Signal, toLocal bool, now sim.Time) {
	n := 0
	if g != nil {
		n = int(g.n)
		if sig.Copies > 0 && sig.Copies < n {
			n = sig.Copies
		}
	}
	if n == 0 {
		m.receive(s, p, in, toLocal, now)
		return
	}
	// Every copy is made before any is forwarded (forwarding may release
	// p), then they go in fast-path order.
	var cs [MaxTorFastPaths]*Packet
	cs[0] = p
	for i := 1; i < n; i++ {
		c := in.pool.Get(len(p.Data))
		copy(c.Data, p.Data)
		c.WireLen, c.Flags, c.SentAt, c.TraceID = p.WireLen, p.Flags, p.SentAt, p.TraceID
		cs[i] = c
	}
	in.Counters.Sent += uint64(n - 1)
	m.c.Copies += uint64(n)
	k := int(g.rot)
	g.rot = uint8((k + n) % int(g.n))
	for i, c := range cs[:n] {
		binary.BigEndian.PutUint16(c.Data[offIPv6Dst+8:], g.paths[(k+i)%int(g.n)])
		m.receive(s, c, in, toLocal, now)
	}
}

// receive forwards one FReTx copy, de-duplicating first when it goes to a
// local host (sender and receiver below one ToR).
func (m *torMulticast) receive(s *Switch, p *Packet, in *Port, toLocal bool, now sim.Time) {
	if toLocal {
		psn := uint32(p.Data[offBTH+9])<<16 | uint32(p.Data[offBTH+10])<<8 | uint32(p.Data[offBTH+11])
		if m.duplicate(dataKey(p.Data), psn, now) {
			m.c.Duplicates++
			in.drop(p, DropDuplicate)
			return
		}
	}
	s.forward(p, in)
}

// duplicate reports whether (k, psn) was seen within the window, and
// records it if not.
func (m *torMulticast) duplicate(k torKey, psn uint32, now sim.Time) bool {
	dk := dedupKey{k, psn}
	if i, ok := m.dedup[dk]; ok && now-m.ring[i].at < m.window {
		return true
	}
	if m.dedup == nil {
		m.dedup = make(map[dedupKey]int32, min(m.cfg.DedupEntries, 1024))
	}
	e := dedupEntry{key: dk, at: now}
	if len(m.ring) < m.cfg.DedupEntries {
		m.dedup[dk] = int32(len(m.ring))
		m.ring = append(m.ring, e)
		return false
	}
	// Full: evict the oldest (its key may have been re-recorded since, at
	// a newer slot, which then stays).
	i := m.head
	if old := m.ring[i].key; m.dedup[old] == int32(i) {
		delete(m.dedup, old)
	}
	m.ring[i] = e
	m.dedup[dk] = int32(i)
	m.head = (i + 1) % len(m.ring)
	return false
}

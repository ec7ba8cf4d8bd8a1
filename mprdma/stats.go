package mprdma

// Stats are one QP's multipath and loss-recovery counters beside
// verbs.QPStats (QP.MPStats). The responder half fills the receive and
// detection fields, the requester half the sending ones.
type Stats struct {
	// --- responder ---

	// BitmapOccupancy is the bitmap entries in use now: from ePSN to the
	// highest PSN placed beyond it (0 when nothing is out of order).
	BitmapOccupancy int
	// BitmapPeak is the largest BitmapOccupancy seen.
	BitmapPeak int
	// OccupancyNs is the time integral of BitmapOccupancy (entries × ns),
	// advanced at every input: divided by elapsed time, the mean.
	OccupancyNs float64
	// BitmapOverflows counts data packets dropped at or beyond ePSN + L.
	BitmapOverflows uint64
	// LossesDetected counts holes the responder judged lost (by degree).
	LossesDetected uint64
	// NAKsSent counts go-back-N NAKs (overflow, MP-RDMA loss, fallback);
	// FNACKsSent selective NAKs / FNACKs.
	NAKsSent, FNACKsSent uint64
	// Repaired counts requested holes that were filled (Repair records).
	Repaired uint64
	// RetxFailures counts requested repairs not arriving within
	// RepairTimeout (OrderRE then falls back; for MP-RDMA and Random the
	// same clock only measures).
	RetxFailures uint64
	// SpuriousLosses counts holes judged lost whose original later arrived
	// first (reordering mistaken for loss), as the responder can tell
	// (Config.BaseRTT; responder.go): a lower bound where go-back-N makes a
	// fill ambiguous (MP-RDMA), exact where only selective repairs run.
	SpuriousLosses uint64
	// FastArrivals and SlowArrivals split data arrivals by the L_fast test
	// (placed originals; repairs are not judged).
	FastArrivals, SlowArrivals uint64
	// ObMax is the observed out-of-order degree now (OrderRE's ob_max,
	// measured under every scheme); LMax the loss threshold in use now
	// (ob_max + Delta for OrderRE, LossThreshold otherwise).
	ObMax, LMax int
	// RepairsDropped counts Repair records dropped unpolled (the ring
	// keeps the newest); ControlDropped ACKs dropped because the control
	// queue was full (NAKs and FNACKs are never dropped).
	RepairsDropped, ControlDropped uint64

	// --- requester ---

	// GoBackNs counts go-back-N rounds (a NAK or a timeout rewinding).
	GoBackNs uint64
	// SelectiveRetx counts single-PSN retransmissions (Random's, and
	// OrderRE's FReTx packets as the sender sent them, before the ToR
	// copies them).
	SelectiveRetx uint64
	// FReTxSent counts FReTx packets sent (OrderRE).
	FReTxSent uint64
	// PathSends counts data packets sent per path (first transmissions
	// and retransmissions).
	PathSends [MaxPaths]uint64
	// CwndPackets is the congestion window now, in packets.
	CwndPackets float64
	// SlowPathAcks counts ACKs that came back more than SlowPathLag behind
	// the highest acknowledged packet: their path was not clocked, the
	// packets they released went to a random other path (MP-RDMA's
	// out-of-order aware path selection).
	SlowPathAcks uint64
	// GroupCreates and GroupDeletes count OrderRE's piggybacked group
	// signals sent (data packets carrying FlagCreate / FlagDelete).
	GroupCreates, GroupDeletes uint64
}

// Repair is one requested hole's life at the responder: when it was judged
// lost (and a NAK or FNACK asked for it) and when it was filled.
type Repair struct {
	PSN        uint32
	DetectedAt int64 // ns
	RepairedAt int64 // ns
	// Requests is how many NAKs / FNACKs asked for it before it arrived.
	Requests int
	// Spurious reports the hole was filled by its late original, not a
	// repair (reordering mistaken for loss; Config.BaseRTT).
	Spurious bool
}

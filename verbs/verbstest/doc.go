// Package verbstest is a conformance kit for verbs.Transport
// implementations, shaped like net/http/httptest: a package other packages'
// tests import.
//
// A Pair is two connected QPs, each with a real verbs.Memory region, and
// the wire between them on a virtual clock the Pair owns. The Pair drives
// the QPs exactly as the NIC's RDMA engine does (verbs.Transport's
// contract: after Post, Receive and Tick, Send until it reports nothing,
// then Deadline, then PollCompletions; buffers of verbs.MaxTxBytes; timers
// at or before the last Tick ignored). Hooks — Drop, Duplicate, Delay,
// Reorder, Trim — pick packets by a predicate on Packet (direction, index,
// data index, PSN, attempt). RunConformance runs the shared suite: size
// classes, a loss at every window position, PSN wrap, retry exhaustion,
// remote access errors, WriteImm and completion ordering.
//
// verbstest knows no packet format: a transport describes its own through
// Transport (how to tell data packets, where the PSN is, how long the
// headers a trimming switch keeps are). A new transport gets the kit with
//
//	func TestConformance(t *testing.T) {
//		tr := verbstest.Transport{Name: "mine", MTU: 4096, Window: 32,
//			New:    func(m *verbs.Memory, qpn uint32, seed uint64) verbs.Transport { return mine.New(mine.DefaultConfig(), m, qpn, seed) },
//			IsData: func(b []byte) bool { return mine.IsData(b[0]) }}
//		verbstest.RunConformance(t, tr.NewPair)
//	}
//
// and hand-written tests build a Pair with tr.NewPair(t, verbstest.Config{Size: n}),
// post with Pair.Write or Pair.Post and run it with RunUntilDone or Step.
//
// verbstest imports only verbs and the standard library; it owns no
// transport's internals and must not learn any.
package verbstest

package sim

import (
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
)

// Epoch is the wall-clock date virtual time 0 maps to for components that
// want a time.Time (netstack). It is fixed, so runs stay reproducible.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// NetstackClock adapts a Loop to gVisor's tcpip.Clock, so every netstack
// timer (ICMP, NDP, TCP) runs in virtual time on the loop goroutine.
// Netstack must only call it from the loop goroutine (true for UDP and
// ICMPv6, which netstack processes inline).
type NetstackClock struct{ L *Loop }

var _ tcpip.Clock = NetstackClock{}

// Now implements tcpip.Clock.
func (c NetstackClock) Now() time.Time { return Epoch.Add(time.Duration(c.L.Now())) }

// NowMonotonic implements tcpip.Clock.
func (c NetstackClock) NowMonotonic() tcpip.MonotonicTime {
	return tcpip.MonotonicTime{}.Add(time.Duration(c.L.Now()))
}

// AfterFunc implements tcpip.Clock.
func (c NetstackClock) AfterFunc(d time.Duration, f func()) tcpip.Timer {
	t := &netTimer{l: c.L, f: f}
	t.t = c.L.AfterFunc(d, f)
	return t
}

type netTimer struct {
	l *Loop
	f func()
	t Timer
}

func (t *netTimer) Stop() bool { return t.t.Stop() }

func (t *netTimer) Reset(d time.Duration) {
	t.t.Stop()
	t.t = t.l.AfterFunc(d, t.f)
}

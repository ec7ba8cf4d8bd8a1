package wallclock

import (
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// fineNap sleeps d with nanosleep(2), which the kernel ends within tens
// of microseconds (the Go runtime's timers: about a millisecond late).
// It is the fallback when no eventfd can be made.
var fineNap = func(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}

// fineSleeper takes a short sleep as one ppoll(2) on an eventfd, with a
// nanosecond timeout (an hrtimer: it ends within tens of microseconds,
// not the Go timers' millisecond) that Wake ends early. The fallback,
// 50 µs nanosleep steps checking the wake channel between them, woke a
// process 20 000 times a second while it waited: 65 lab containers
// doing so took the whole of a 2-core machine.
type fineSleeper struct {
	efd      int
	sleeping atomic.Bool
}

func newFineSleeper() *fineSleeper {
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil
	}
	return &fineSleeper{efd: efd}
}

// closeWith closes the eventfd once c is collected.
func (f *fineSleeper) closeWith(c *Clock) {
	runtime.AddCleanup(c, func(fd int) { unix.Close(fd) }, f.efd)
}

// sleep waits until c.Now() ≥ deadline or wake has a token (or Wake is
// called while it waits).
func (f *fineSleeper) sleep(c *Clock, deadline int64, wake <-chan struct{}) {
	f.sleeping.Store(true)
	defer f.sleeping.Store(false)
	fds := []unix.PollFd{{Fd: int32(f.efd), Events: unix.POLLIN}}
	var buf [8]byte
	for {
		// After sleeping is set: a token sent before this is seen here,
		// one sent after it comes with a Wake that ends the ppoll.
		select {
		case <-wake:
			return
		default:
		}
		rem := deadline - c.Now()
		if rem <= 0 {
			return
		}
		ts := unix.NsecToTimespec(rem)
		if n, _ := unix.Ppoll(fds, &ts, nil); n > 0 {
			unix.Read(f.efd, buf[:]) // drain: the wake channel says what to do
		}
	}
}

// wake ends a sleep in progress (a no-op, one atomic load, otherwise).
func (f *fineSleeper) wake() {
	if f.sleeping.Load() {
		one := [8]byte{1}
		unix.Write(f.efd, one[:])
	}
}

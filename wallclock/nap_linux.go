package wallclock

import (
	"time"

	"golang.org/x/sys/unix"
)

// fineNap sleeps d with nanosleep(2), which the kernel ends within tens
// of microseconds (the Go runtime's timers: about a millisecond late).
var fineNap = func(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR {
	}
}

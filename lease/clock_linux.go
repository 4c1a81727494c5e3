package lease

import (
	"time"

	"golang.org/x/sys/unix"
)

// bootElapsed is CLOCK_BOOTTIME: the time since boot, suspends included.
// A kernel without it (before 2.6.39) gets Go's monotonic clock.
var bootElapsed = func() func() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return monoElapsed
	}
	return func() time.Duration {
		var ts unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) // worked once: it does not start failing
		return time.Duration(ts.Nano())
	}
}()

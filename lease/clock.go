package lease

import "time"

// elapsed reads the clock a lease's deadline is measured on (Config.Mono
// by default): never stepped, and counting through a system suspend where
// the system has such a clock (CLOCK_BOOTTIME on Linux, clock_linux.go).
// Go's monotonic clock is CLOCK_MONOTONIC there, which stops while the
// machine sleeps: a holder suspended past its deadline would wake with
// the deadline still ahead by its own count, its gate open, while the
// key expired on the server and a standby took over.
var elapsed = bootElapsed

// processStart anchors monoElapsed.
var processStart = time.Now()

// monoElapsed is Go's monotonic clock since the process started.
func monoElapsed() time.Duration { return time.Since(processStart) }

package lease

import "testing"

// TestDefaultClockIsBootTime: on Linux the default clock is
// CLOCK_BOOTTIME (it counts the time since boot, suspends included), not
// the process's monotonic clock.
func TestDefaultClockIsBootTime(t *testing.T) {
	if d := elapsed(); d < monoElapsed() {
		t.Errorf("default clock at %v, below the time since the process started (%v): not the time since boot", d, monoElapsed())
	}
}

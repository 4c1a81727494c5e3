//go:build !linux

package lease

// bootElapsed is Go's monotonic clock where no clock counting through a
// suspend is used (on Linux: CLOCK_BOOTTIME, clock_linux.go).
var bootElapsed = monoElapsed

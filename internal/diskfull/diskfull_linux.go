// Package diskfull lets tests make every write of their own process fail as
// on a full disk, without root or a mount.
package diskfull

import (
	"syscall"
	"testing"
)

// MetaPages is where bbolt's two meta pages end (4 KiB pages): with the
// limit here every transaction fails writing its first data page.
const MetaPages = 8192

// Limit makes every write of this process beyond the first limit bytes of
// any file fail with EFBIG, as a full disk fails writes with ENOSPC (root
// ignores file permissions, not this limit; Go ignores SIGXFSZ, so the
// write returns the error). It skips the test when the limit cannot be
// set. The returned function lifts the limit; it is lifted at the end of
// the test in any case. Tests using it must not run in parallel.
func Limit(t testing.TB, limit uint64) (lift func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	tight := old
	tight.Cur = min(limit, old.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &tight); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	done := false
	lift = func() {
		if !done {
			done = true
			if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
				t.Fatalf("lifting the file size limit: %v", err)
			}
		}
	}
	t.Cleanup(lift)
	return lift
}

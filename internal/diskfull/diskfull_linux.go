// Package diskfull lets tests make every write of their own process fail as
// on a full disk, without root or a mount. The limit applies to every file
// of the process, the test framework's own included, so a test using it
// runs in a child process (InChild).
package diskfull

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

const childEnv = "DISKFULL_TEST_CHILD"

// InChild runs the calling top-level test again in a child process of the
// test binary and reports the child's outcome; it returns false there. In
// the child it returns true and the test goes on.
func InChild(t *testing.T) bool {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	switch {
	case err != nil:
		t.Fatalf("%s in a child process: %v\n%s", t.Name(), err, out)
	case strings.Contains(string(out), "--- SKIP: "+t.Name()):
		t.Skipf("skipped in the child process:\n%s", out)
	case !strings.Contains(string(out), "--- PASS: "+t.Name()):
		t.Fatalf("%s did not run in the child process:\n%s", t.Name(), out)
	}
	return false
}

// MetaPages is where bbolt's two meta pages end (4 KiB pages): with the
// limit here every transaction fails writing its first data page.
const MetaPages = 8192

// Limit makes every write of this process beyond the first limit bytes of
// any file fail with EFBIG, as a full disk fails writes with ENOSPC (root
// ignores file permissions, not this limit; Go ignores SIGXFSZ, so the
// write returns the error). It skips the test when the limit cannot be
// set. The returned function lifts the limit; it is lifted at the end of
// the test in any case. Call it in a child process only (InChild).
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

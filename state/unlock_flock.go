//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package state

import (
	"fmt"
	"os"
	"syscall"
)

// unlockFile releases bbolt's flock on a file whose bolt.Open panicked. The
// lock lives on the open file description, which bbolt's memory map keeps
// alive after the descriptor is closed, so it must be released explicitly.
func unlockFile(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}

// fileIdentity names the open file by its device and inode: the file its
// lock (flock) is on. A copy of the file has another; "" when unknown.
func fileIdentity(f *os.File) string {
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

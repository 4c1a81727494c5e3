//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package state

import (
	"os"
	"syscall"
)

// unlockFile releases bbolt's flock on a file whose bolt.Open panicked. The
// lock lives on the open file description, which bbolt's memory map keeps
// alive after the descriptor is closed, so it must be released explicitly.
func unlockFile(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}

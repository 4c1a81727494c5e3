package state

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestLockIDTellsACopy: the same file opened again has the same lock id; a
// copy of it has another (the lease's shortcut for a restart on the same
// file must not hold for a copy).
func TestLockIDTellsACopy(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("no device and inode here: LockID is empty")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	first := s.LockID()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(dir, "copy.db")
	if err := os.WriteFile(copyPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	cp, err := Open(copyPath, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if first == "" || again.LockID() != first {
		t.Errorf("the same file: lock ids %q and %q", first, again.LockID())
	}
	if cp.LockID() == first {
		t.Errorf("a copy has the original's lock id %q", first)
	}
}

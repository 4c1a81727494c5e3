//go:build linux

package state

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/internal/diskfull"
	"github.com/orderwatch/orderwatch/plenty/order"
)

// The state directory fills up: every write fails with ErrNotWritable and
// stores nothing, WriteErr and Probe say so, a reopen works without writing,
// and once there is room again the same Store writes and WriteErr clears.
func TestNotWritable(t *testing.T) {
	if !diskfull.InChild(t) {
		return
	}
	path := tempPath(t)
	var changes []error
	s := openT(t, path, Options{OnWritable: func(err error) { changes = append(changes, err) }})
	wm := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if err := s.Commit(Commit{States: puts(1, 100), Events: events(2, "a"), Watermark: &wm}); err != nil {
		t.Fatal(err)
	}
	if s.WriteErr() != nil {
		t.Fatalf("WriteErr after a good commit: %v", s.WriteErr())
	}

	lift := diskfull.Limit(t, diskfull.MetaPages)
	wm2 := wm.Add(time.Hour)
	err := s.Commit(Commit{States: puts(101, 400), Events: events(3, "b"), Watermark: &wm2, BaselineDone: true})
	if !errors.Is(err, ErrNotWritable) || !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("commit on a full disk: err = %v, want ErrNotWritable wrapping EFBIG", err)
	}
	if !errors.Is(s.WriteErr(), ErrNotWritable) {
		t.Errorf("WriteErr = %v, want ErrNotWritable", s.WriteErr())
	}
	if err := s.DeleteOutbox(1); !errors.Is(err, ErrNotWritable) {
		t.Errorf("DeleteOutbox on a full disk: %v", err)
	}
	// Nothing of the failed transactions is visible, to this Store or to a
	// process that opens the file after a crash (still on the full disk).
	check := func(s *Store) {
		t.Helper()
		if got := lookup(t, s, 100, 101, 400); got[0] == nil || got[1] != nil || got[2] != nil {
			t.Errorf("states after failed commits: %v", got)
		}
		if ob, _ := s.Outbox(0, 0); len(ob) != 2 || s.OutboxDepth() != 2 {
			t.Errorf("outbox after failed writes: %d entries, depth %d; want 2", len(ob), s.OutboxDepth())
		}
		if m, _ := s.Meta(); !m.Watermark.Equal(wm) || m.BaselineDone {
			t.Errorf("meta after failed commits: %+v", m)
		}
	}
	check(s)
	if len(changes) != 1 || !errors.Is(changes[0], ErrNotWritable) {
		t.Errorf("OnWritable calls on a full disk: %v; want one, the error", changes)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{Timeout: time.Second, OnWritable: func(err error) { changes = append(changes, err) }})
	if err != nil {
		t.Fatalf("reopening on a full disk: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	check(s)

	if err := s.SaveToken(t.Context(), order.Token{AccessToken: "x", ExpiresAt: wm}); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("SaveToken after the reopen, still full: %v", err)
	}
	lift()
	// A small write works on a full disk when it reuses freed pages; only a
	// commit (what the sweep waits for) says the file takes writes again.
	if err := s.DeleteOutbox(1); err != nil {
		t.Fatal(err)
	}
	if s.WriteErr() == nil {
		t.Error("a delete cleared WriteErr; only a commit should")
	}
	if err := s.Commit(Commit{States: puts(101, 400), Events: events(3, "b"), Watermark: &wm2}); err != nil || s.WriteErr() != nil {
		t.Fatalf("commit with room again: %v (WriteErr %v)", err, s.WriteErr())
	}
	if len(changes) != 3 || changes[2] != nil {
		t.Errorf("OnWritable calls: %v; want failing, failing (the reopened store), working", changes)
	}
	if got := lookup(t, s, 400); got[0] == nil {
		t.Error("the commit after recovery is not visible")
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() <= 8192 {
		t.Errorf("state file: %v, %v", fi, err)
	}
}

// A state file in a directory the watcher cannot write ends the start with
// an error that says so (as root, permissions do not apply: skipped).
func TestOpenNotWritable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores file permissions")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
	_, err := Open(dir+"/state.db", Options{})
	if !errors.Is(err, ErrNotWritable) || !strings.Contains(err.Error(), "cannot be opened for writing") {
		t.Fatalf("Open in a read-only directory: %v", err)
	}
}

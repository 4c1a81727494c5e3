package replica_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/state"
)

// inode is the inode of the file at path.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Skip("no inode on this system")
	}
	return st.Ino
}

// advance has the active a commit the watermark wm and checkpoint it.
func (g *group) advance(a *member, wm time.Time) time.Time {
	g.t.Helper()
	if err := a.store.Commit(state.Commit{Watermark: &wm}); err != nil {
		g.t.Fatal(err)
	}
	a.rep.Swept()
	waitFor(g.t, "a's checkpoint of "+wm.Format(time.RFC3339), func() bool {
		cp, ok := g.checkpoint()
		return ok && strings.Contains(string(cp.State), wm.Format(time.RFC3339))
	})
	return wm
}

// TestBackupRestoredInPlaceRestoresFromTheGroup: a backup of the
// active's state file (its bytes, taken during its tenure) is copied back
// over the same file after the active ran on (the group's checkpoint
// advanced) and died: the same inode, the same record of its tenure. The
// replica started on it must not continue that tenure from the backup's
// older watermark: it restores the group's checkpoint and says that its
// file is a copy (a backup).
func TestBackupRestoredInPlaceRestoresFromTheGroup(t *testing.T) {
	g := newGroup(t)
	wm1 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	a := g.activeWithCheckpoint(&pipeline{}, wm1)
	path := a.store.Path()
	backup := filepath.Join(t.TempDir(), "backup.db")
	copyFile(t, path, backup)

	wm2 := g.advance(a, wm1.Add(time.Hour))
	a.kill()
	_ = a.store.Close()
	ino := inode(t, path)
	copyFile(t, backup, path) // in place: truncated and written, the same inode
	if inode(t, path) != ino {
		t.Fatal("precondition: the backup was not restored in place")
	}

	b := g.startOn("a", path, &pipeline{})
	waitFor(t, "the restored backup active", b.working)
	if m, err := b.store.Meta(); err != nil || !m.Watermark.Equal(wm2) {
		t.Errorf("the restored backup works from the watermark %v (%v), want the group's %v", m.Watermark, err, wm2)
	}
	if logs := b.logs.String(); !strings.Contains(logs, "backup") || !strings.Contains(logs, "older") {
		t.Errorf("the restored backup does not say it is an older copy of its file:\n%s", logs)
	}
}

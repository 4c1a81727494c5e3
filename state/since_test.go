package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty/order"
)

// at is a state in status with updatedAt u and statusSince since ("" unknown).
func at(t testing.TB, status, u, since string) diff.State {
	t.Helper()
	s := diff.State{StatusID: order.MustDecimal(status), LockStatus: "unlocked", TypeID: 1, UpdatedAt: ptime(t, u)}
	if since != "" {
		s.StatusSince = ptime(t, since)
	}
	return s
}

func TestStatusSinceSurvivesCommitAndReopen(t *testing.T) {
	path := tempPath(t)
	s := openT(t, path, Options{})
	a := at(t, "5", "2026-11-22T10:00:00+01:00", "2026-11-20T08:00:00.5+01:00")
	b := at(t, "6", "2026-11-22T10:00:00+01:00", "")
	if err := s.Commit(Commit{States: []Put{{1, a}, {2, b}}}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	s = openT(t, path, Options{ReadOnly: true})
	got := lookup(t, s, 1, 2)
	if !got[0].StatusSince.Equal(a.StatusSince.Time) || got[0].StatusSince.String() != a.StatusSince.String() {
		t.Errorf("order 1 since %v, want %v", got[0].StatusSince, a.StatusSince)
	}
	if !got[1].StatusSince.Equal(b.UpdatedAt.Time) {
		t.Errorf("order 2 (since unknown) since %v, want its updatedAt %v", got[1].StatusSince, b.UpdatedAt)
	}
}

// TestApplyMirroredStatusSince: a standby's snapshot learns when each order
// entered its status from the events as the active does: first sight and a
// status change at the event's after.updatedAt, kept otherwise.
func TestApplyMirroredStatusSince(t *testing.T) {
	s := openT(t, tempPath(t), Options{})
	apply := func(m ...Mirrored) {
		t.Helper()
		if err := s.ApplyMirrored(m); err != nil {
			t.Fatal(err)
		}
	}
	since := func(id int64) string {
		t.Helper()
		st := lookup(t, s, id)[0]
		if st == nil {
			t.Fatalf("order %d missing", id)
		}
		return st.StatusSince.String()
	}
	const t0, t1, t2, t3 = "2026-11-20T10:00:00+01:00", "2026-11-20T11:00:00+01:00", "2026-11-21T09:00:00+01:00", "2026-11-22T09:00:00+01:00"
	apply(Mirrored{1, at(t, "5", t0, "")}) // discovered
	if got := since(1); got != t0 {
		t.Fatalf("first sight: since %s, want %s", got, t0)
	}
	locked := at(t, "5", t1, "")
	locked.LockStatus = "permanentlyLocked"
	apply(Mirrored{1, locked}) // lock_changed
	if got := since(1); got != t0 {
		t.Errorf("lock change: since %s, want %s kept", got, t0)
	}
	apply(Mirrored{1, at(t, "6", t2, "")}, Mirrored{1, locked}) // status_changed, then an old event again
	if got := since(1); got != t2 {
		t.Errorf("status change: since %s, want %s", got, t2)
	}
	apply(Mirrored{1, at(t, "6", t2, "")}) // the same event again
	if got := since(1); got != t2 {
		t.Errorf("re-applied: since %s, want %s", got, t2)
	}
	apply(Mirrored{1, at(t, "6.0", t3, "")}) // 6 -> 6.0 is no change
	if got := since(1); got != t2 {
		t.Errorf("same status by value: since %s, want %s", got, t2)
	}
}

// TestRevertOutboxStatusSince: undoing an event that did not change the
// status keeps the time the order entered it; undoing a status change
// leaves updatedAt for it (the event does not carry the earlier time).
func TestRevertOutboxStatusSince(t *testing.T) {
	s := openT(t, tempPath(t), Options{})
	const t1, t2 = "2026-11-21T10:00:00Z", "2026-11-22T10:00:00Z"
	base := at(t, "5", t1, "2026-11-01T00:00:00Z")
	lock := at(t, "5", t2, "2026-11-01T00:00:00Z")
	lock.LockStatus = "permanentlyLocked"
	moved := at(t, "6", t2, t2)
	if err := s.Commit(Commit{States: []Put{{1, base}, {2, base}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(Commit{States: []Put{{1, lock}, {2, moved}}, Events: []OutboxEntry{{ID: "lock"}, {ID: "moved"}}}); err != nil {
		t.Fatal(err)
	}
	// What DecodeEvent gives: states without StatusSince.
	strip := func(s diff.State) *diff.State { s.StatusSince = order.Time{}; return &s }
	n, err := s.RevertOutbox(func(e OutboxEntry) (Undo, error) {
		switch e.ID {
		case "lock":
			return Undo{ID: 1, Before: strip(base), After: *strip(lock)}, nil
		case "moved":
			return Undo{ID: 2, Before: strip(base), After: *strip(moved)}, nil
		}
		return Undo{}, errors.New("unknown")
	})
	if err != nil || n != 2 {
		t.Fatalf("RevertOutbox: %d, %v", n, err)
	}
	got := lookup(t, s, 1, 2)
	if got[0].StatusSince.String() != "2026-11-01T00:00:00Z" || !got[0].Same(base) {
		t.Errorf("order 1 after undoing a lock change: %+v, want since 2026-11-01", got[0])
	}
	if got[1].StatusSince.String() != t1 || !got[1].Same(base) {
		t.Errorf("order 2 after undoing a status change: %+v, want since = updatedAt %s", got[1], t1)
	}
}

func TestDumpLoadKeepsStatusSince(t *testing.T) {
	a := openT(t, tempPath(t), Options{})
	st := at(t, "5", "2026-11-22T10:00:00+01:00", "2026-11-02T10:00:00+01:00")
	if err := a.Commit(Commit{States: []Put{{7, st}}}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := a.DumpOrders(&buf); err != nil {
		t.Fatal(err)
	}
	if buf.Bytes()[0] != dumpVersion {
		t.Errorf("dump version %d, want %d", buf.Bytes()[0], dumpVersion)
	}
	b := openT(t, tempPath(t), Options{})
	if _, err := b.LoadOrders(bytes.NewReader(buf.Bytes())); err != nil {
		t.Fatal(err)
	}
	if got := lookup(t, b, 7)[0]; got == nil || got.StatusSince.String() != st.StatusSince.String() {
		t.Errorf("loaded %+v, want since %s", got, st.StatusSince)
	}
	// A dump of an older active (dump version 1, state encoding 1) loads,
	// with statusSince = updatedAt.
	old := []byte{dumpVersion1}
	old = binary.BigEndian.AppendUint64(old, 8)
	v := version1(appendState(nil, new(at(t, "6", "2026-11-22T11:00:00+01:00", ""))))
	old = append(binary.AppendUvarint(old, uint64(len(v))), v...)
	if _, err := b.LoadOrders(bytes.NewReader(old)); err != nil {
		t.Fatalf("loading a version 1 dump: %v", err)
	}
	if got := lookup(t, b, 8)[0]; got == nil || got.StatusSince.String() != "2026-11-22T11:00:00+01:00" {
		t.Errorf("loaded from a version 1 dump: %+v", got)
	}
	if _, err := b.LoadOrders(bytes.NewReader([]byte{3})); err == nil {
		t.Error("a dump of version 3 loaded")
	}
}

// TestMigrationFromV2: a file of schema version 2 holds state values of
// encoding version 1; it opens as version 3 without rewriting them, and
// its orders read as having entered their status at their updatedAt.
func TestMigrationFromV2(t *testing.T) {
	path := tempPath(t)
	old := typical(7)
	writeBolt(t, path, func(tx *bolt.Tx) error {
		if err := initialise(tx); err != nil {
			return err
		}
		if err := tx.Bucket(bucketMeta).Put(keySchema, binary.BigEndian.AppendUint64(nil, 2)); err != nil {
			return err
		}
		return tx.Bucket(bucketOrders).Put(binary.BigEndian.AppendUint64(nil, 7), version1(appendState(nil, &old)))
	})
	s := openT(t, path, Options{})
	if m, err := s.Meta(); err != nil || m.SchemaVersion != 3 {
		t.Fatalf("after migration: %+v, %v", m, err)
	}
	got := lookup(t, s, 7)[0]
	if got == nil || !got.Same(old) || !got.StatusSince.Equal(old.UpdatedAt.Time) {
		t.Errorf("order 7 after migration: %+v", got)
	}
}

package state

import (
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestQuarantineCommittedWithTheSlice(t *testing.T) {
	path := tempPath(t)
	s := openT(t, path, Options{})
	t1 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	wm := t1.Add(-time.Minute)
	note := func(id int64, at time.Time, reason string) QuarantineOp {
		return QuarantineOp{OrderID: id, Entry: &Quarantined{Reason: reason, Excerpt: `{"id":7,"statusId":{}}`, UpdatedAt: "2026-11-25T10:59:00+01:00",
			FirstSeen: at, LastSeen: at, Attempts: 1}}
	}
	// One transaction: the state of a readable order, its event, the
	// watermark and the quarantine of the unreadable one.
	err := s.Commit(Commit{
		States: []Put{{ID: 5, State: typical(5)}}, Events: events(1, "a"), Watermark: &wm,
		Quarantine: []QuarantineOp{note(7, t1, "statusId: want a number"), note(9, t1, "x")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.QuarantineCount(); err != nil || n != 2 {
		t.Fatalf("QuarantineCount = %d, %v; want 2", n, err)
	}
	// Seen again later: first seen stays, attempts add up, the reason is the latest.
	t2 := t1.Add(time.Hour)
	if err := s.Commit(Commit{Quarantine: []QuarantineOp{note(7, t2, "statusId: still broken"), {OrderID: 9}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, path, Options{ReadOnly: true})
	all, err := s.Quarantine()
	if err != nil || len(all) != 1 {
		t.Fatalf("Quarantine = %+v, %v; want order 7 only (9 was released)", all, err)
	}
	q := all[0]
	if q.OrderID != 7 || !q.FirstSeen.Equal(t1) || !q.LastSeen.Equal(t2) || q.Attempts != 2 || q.Reason != "statusId: still broken" ||
		q.UpdatedAt != "2026-11-25T10:59:00+01:00" || !strings.Contains(q.Excerpt, `"statusId":{}`) {
		t.Errorf("record = %+v", q)
	}
	if got, found, err := s.QuarantinedOrder(7); err != nil || !found || got != q {
		t.Errorf("QuarantinedOrder(7) = %+v, %v, %v", got, found, err)
	}
	if _, found, err := s.QuarantinedOrder(9); err != nil || found {
		t.Errorf("QuarantinedOrder(9): found %v, %v", found, err)
	}
}

func TestQuarantineOpsApplyInOrder(t *testing.T) {
	s := openT(t, tempPath(t), Options{})
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	bad := &Quarantined{Reason: "r", FirstSeen: at, LastSeen: at, Attempts: 1}
	// Undecodable, then read fine in a rescan of the same slice: released.
	if err := s.Commit(Commit{Quarantine: []QuarantineOp{{OrderID: 3, Entry: bad}, {OrderID: 3}}}); err != nil {
		t.Fatal(err)
	}
	// Read fine, then undecodable: quarantined.
	if err := s.Commit(Commit{Quarantine: []QuarantineOp{{OrderID: 4}, {OrderID: 4, Entry: bad}}}); err != nil {
		t.Fatal(err)
	}
	all, err := s.Quarantine()
	if err != nil || len(all) != 1 || all[0].OrderID != 4 {
		t.Errorf("Quarantine = %+v, %v; want order 4 only", all, err)
	}
	// A bad op fails the whole commit: nothing of it is stored.
	wm := at
	if err := s.Commit(Commit{Watermark: &wm, Quarantine: []QuarantineOp{{OrderID: 0, Entry: bad}}}); err == nil {
		t.Error("order id 0 was accepted")
	}
	if m, _ := s.Meta(); !m.Watermark.IsZero() {
		t.Errorf("watermark %v stored by a failed commit", m.Watermark)
	}
}

func TestQuarantineUnreadableRecordIsReported(t *testing.T) {
	path := tempPath(t)
	s := openT(t, path, Options{})
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketQuarantine).Put(quarantineKey(11), []byte("not json"))
	}); err != nil {
		t.Fatal(err)
	}
	all, err := s.Quarantine()
	if err != nil || len(all) != 1 || all[0].OrderID != 11 || !strings.Contains(all[0].Reason, "unreadable") {
		t.Fatalf("Quarantine = %+v, %v", all, err)
	}
	// A new note overwrites the unreadable record.
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	if err := s.Commit(Commit{Quarantine: []QuarantineOp{{OrderID: 11, Entry: &Quarantined{Reason: "r", FirstSeen: at, LastSeen: at, Attempts: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if q, found, err := s.QuarantinedOrder(11); err != nil || !found || q.Reason != "r" || q.Attempts != 1 {
		t.Errorf("after a new note: %+v, %v, %v", q, found, err)
	}
}

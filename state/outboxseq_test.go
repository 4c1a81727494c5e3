package state

import (
	"path/filepath"
	"testing"
)

// OutboxLastSeq: 0 for an empty outbox, then the highest Seq; entries
// committed later always have a higher one, deletes or not.
func TestOutboxLastSeq(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "state.db"), Options{})
	last := func() uint64 {
		t.Helper()
		n, err := s.OutboxLastSeq()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := last(); n != 0 {
		t.Fatalf("empty outbox: %d, want 0", n)
	}
	ev := []OutboxEntry{{ID: "a", Subject: "orders.x.1"}, {ID: "b", Subject: "orders.x.2"}, {ID: "c", Subject: "orders.x.3"}}
	if err := s.Commit(Commit{Events: ev}); err != nil {
		t.Fatal(err)
	}
	if n := last(); n != 3 {
		t.Fatalf("after 3 entries: %d, want 3", n)
	}
	if err := s.DeleteOutbox(3); err != nil {
		t.Fatal(err)
	}
	b := last()
	if err := s.Commit(Commit{Events: ev[:1]}); err != nil {
		t.Fatal(err)
	}
	es, err := s.Outbox(b, 0)
	if err != nil || len(es) != 1 || es[0].ID != "a" {
		t.Errorf("entries after %d: %v %v, want the one committed later", b, es, err)
	}
}

package replica

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/state"
)

// TestSweepWithoutEventsSkipsItsCheckpoint: after a verified sweep the
// checkpoint loop writes a checkpoint when the sweep added events to the
// outbox, when the last one is CheckpointEvery old (10 s by default), or
// when it wrote none yet; a sweep that only moved the watermark does not.
func TestSweepWithoutEventsSkipsItsCheckpoint(t *testing.T) {
	st, err := state.Open(filepath.Join(t.TempDir(), "s.db"), state.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	r := New(Config{Store: st, Now: func() time.Time { return now }})
	if r.cfg.CheckpointEvery != 10*time.Second {
		t.Fatalf("default CheckpointEvery %v, want 10s", r.cfg.CheckpointEvery)
	}
	added, due := r.checkpointDue(checkpointed{})
	if !due {
		t.Fatal("no checkpoint written yet: want one due")
	}
	last := checkpointed{at: now, added: added, written: true}

	wm := now.Add(-time.Minute)
	if err := st.Commit(state.Commit{Watermark: &wm}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	if _, due := r.checkpointDue(last); due {
		t.Error("a sweep that added no event, 2 s after the last checkpoint: want none due")
	}

	wm = wm.Add(time.Second)
	if err := st.Commit(state.Commit{Watermark: &wm, Events: []state.OutboxEntry{{ID: "e1", Subject: "orders.x", Payload: []byte("{}")}}}); err != nil {
		t.Fatal(err)
	}
	if _, due := r.checkpointDue(last); !due {
		t.Error("a sweep that added an event: want a checkpoint due")
	}

	now = last.at.Add(10 * time.Second)
	last.added, _ = st.OutboxAdded()
	if _, due := r.checkpointDue(last); !due {
		t.Error("no event, the last checkpoint 10 s old: want one due")
	}
}

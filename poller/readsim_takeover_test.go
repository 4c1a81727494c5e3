package poller_test

import (
	"encoding/json"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/state"
)

// Takeovers in the read-ledger simulation, at the poller's level, as the
// replica's mirror makes them (mirror.Demoted, ApplyCheckpoint): the
// publisher drains the outbox after every sweep (the events are in the
// stream) and the group's checkpoint is taken at that quiet moment; when
// the active dies (between two sweeps, inside a second look or a probe),
// the successor's state file holds every published event (the standby
// applied the stream), the dead active's unpublished events undone, and
// one of the group's last checkpoints (the latest may lag the active),
// with the ledger it carried. The stream keeps one event per id (its
// duplicate window), as the judge counts them.

// ckptsKept: the successor restores one of the last ckptsKept checkpoints.
const ckptsKept = 3

// publish drains the outbox into the stream and takes the group's
// checkpoint of that quiet moment.
func (s *readSim) publish() {
	t, e := s.t, s.e
	entries, err := e.store.Outbox(0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	seqs := make([]uint64, len(entries))
	for i, en := range entries {
		var ev struct {
			Data struct {
				OrderID int64 `json:"orderId"`
			} `json:"data"`
		}
		if err := json.Unmarshal(en.Payload, &ev); err != nil {
			t.Fatalf("outbox entry %d: %v", en.Seq, err)
		}
		s.published[en.ID] = ev.Data.OrderID
		seqs[i] = en.Seq
	}
	if err := e.store.DeleteOutbox(seqs...); err != nil {
		t.Fatal(err)
	}
	c, quiet, err := e.store.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	if quiet {
		s.ckpts = append(s.ckpts, c)
		if len(s.ckpts) > ckptsKept {
			s.ckpts = s.ckpts[1:]
		}
	}
}

// takeOver makes the state file the successor's: the dead active's
// unpublished events undone in the snapshot, one of the group's last
// checkpoints restored.
func (s *readSim) takeOver() {
	t, e := s.t, s.e
	if len(s.ckpts) == 0 {
		return
	}
	if _, err := e.store.RevertOutbox(func(en state.OutboxEntry) (state.Undo, error) {
		d, err := diff.DecodeEvent(en.Payload)
		if err != nil {
			return state.Undo{}, err
		}
		return state.Undo{ID: d.OrderID, Before: d.Before, After: d.After}, nil
	}); err != nil {
		t.Fatal(err)
	}
	c := s.ckpts[len(s.ckpts)-1-s.rnd.IntN(len(s.ckpts))]
	if err := e.store.RestoreCheckpoint(c, func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	s.takeovers++
}

// eventsByOrder counts the distinct events (ids) of each order in the
// stream, the outbox drained first.
func (s *readSim) eventsByOrder() map[int64]int {
	s.publish()
	count := map[int64]int{}
	for _, id := range s.published {
		count[id]++
	}
	return count
}

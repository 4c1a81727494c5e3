package state

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/orderwatch/orderwatch/diff"
)

// Mirrored is the state an event of the stream carries for an order.
type Mirrored struct {
	ID    int64
	State diff.State
}

// ApplyMirrored writes the states of a batch of events read from the
// stream, in stream order, and the records (the position in the stream)
// in one transaction. A state older than the stored one (by updatedAt) is
// skipped: the snapshot never moves back when an event is applied again
// after a newer state arrived (a loaded snapshot, a re-read batch). When
// the order entered its status follows the stored state as on the active
// (diff.EnteredStatus): kept while the status is the same, else the
// event's after.updatedAt (a status change or a first sight); events do
// not carry it.
func (s *Store) ApplyMirrored(states []Mirrored, recs ...Record) error {
	err := s.update(false, func(tx *bolt.Tx) error {
		orders := tx.Bucket(bucketOrders)
		orders.FillPercent = ordersFillPercent
		var cur diff.State
		for _, m := range states {
			key := binary.BigEndian.AppendUint64(nil, uint64(m.ID))
			prev := (*diff.State)(nil)
			if v := orders.Get(key); v != nil {
				if err := decodeState(v, &cur); err == nil {
					if m.State.UpdatedAt.Before(cur.UpdatedAt.Time) {
						continue
					}
					prev = &cur
				}
			}
			st := m.State
			st.StatusSince = diff.EnteredStatus(prev, st)
			if err := orders.Put(key, appendState(nil, &st)); err != nil {
				return fmt.Errorf("order %d: %w", m.ID, err)
			}
		}
		return putRecords(tx, recs)
	})
	if err != nil {
		return fmt.Errorf("apply mirrored states to state file %s: %w", s.path, err)
	}
	return nil
}

// Undo is what an outbox entry changed: the order's state before its
// commit (nil: the order was unknown) and after.
type Undo struct {
	ID     int64
	Before *diff.State
	After  diff.State
}

// RevertOutbox undoes the outbox of a replica that is no longer active:
// from the newest entry to the oldest, an order whose stored state is still
// the entry's after goes back to its before (or is removed when it was
// unknown), and the entries are deleted; all in one transaction. What the
// replica committed but never published is then published by the active
// replica, which reads that period again, or not at all if it no longer
// holds; this replica never sends it later, after newer events. undo tells
// what an entry changed (decoding its payload); an entry it cannot read is
// deleted without a revert.
func (s *Store) RevertOutbox(undo func(OutboxEntry) (Undo, error)) (reverted int, err error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	deleted := 0
	err = s.update(false, func(tx *bolt.Tx) error {
		reverted, deleted = 0, 0
		orders, outbox := tx.Bucket(bucketOrders), tx.Bucket(bucketOutbox)
		var seqs [][]byte
		c := outbox.Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			seqs = append(seqs, append([]byte(nil), k...))
			e, err := decodeOutbox(k, v)
			if err != nil {
				continue
			}
			u, err := undo(e)
			if err != nil {
				continue
			}
			key := binary.BigEndian.AppendUint64(nil, uint64(u.ID))
			var cur diff.State
			if v := orders.Get(key); v == nil || decodeState(v, &cur) != nil || !cur.Same(u.After) {
				continue
			}
			if u.Before == nil {
				err = orders.Delete(key)
			} else {
				before := *u.Before
				if before.StatusSince.IsZero() && before.StatusID.Equal(cur.StatusID) {
					// Not a status change: the order entered its status
					// when the stored state says. After a status change
					// the event does not tell; updatedAt stands for it.
					before.StatusSince = cur.StatusSince
				}
				err = orders.Put(key, appendState(nil, &before))
			}
			if err != nil {
				return err
			}
			reverted++
		}
		for _, k := range seqs {
			if err := outbox.Delete(k); err != nil {
				return err
			}
			deleted++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("revert the outbox of state file %s: %w", s.path, err)
	}
	s.depth.Add(-int64(deleted))
	return reverted, nil
}

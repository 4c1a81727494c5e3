package state

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/orderwatch/orderwatch/diff"
)

// What a standby replica needs of the state file: the active replica's
// checkpoint (its bookkeeping and records) written into it, the events of
// the stream applied to the snapshot, the active's snapshot loaded whole,
// and, when a replica stops being active, its unpublished outbox undone.

// Checkpoint is the active replica's bookkeeping, as a standby takes it
// over: everything of the state file except the snapshot, the outbox and
// the token (each replica has its own session).
type Checkpoint struct {
	Watermark    time.Time                  `json:"watermark"`
	Baseline     time.Time                  `json:"baseline"`
	BaselineDone bool                       `json:"baselineDone"`
	LastSweep    time.Time                  `json:"lastSweep"`
	Records      map[string]json.RawMessage `json:"records,omitempty"`
	// Quarantine is the active's quarantine of undecodable orders: its
	// watermark has passed them, so a replica taking over must retry them.
	// It holds the first CheckpointQuarantineMax records (by order id) as
	// they are, and QuarantineIDs the ids of the next
	// CheckpointQuarantineIDsMax: a checkpoint must fit in one NATS message
	// (1 MB by default), and a record with its excerpt takes some 650
	// bytes. A replica taking over retries those orders by id at once and
	// learns their reasons again; orders beyond both bounds are not carried
	// (each leaves the new active's sight until a later change of it is
	// read, decodable or not).
	Quarantine    []Quarantined `json:"quarantine,omitempty"`
	QuarantineIDs []int64       `json:"quarantineIds,omitempty"`
}

// Bounds of the quarantine a checkpoint carries (see Checkpoint): about
// 130 kB of records and at most 400 kB of ids (20 bytes each).
const (
	CheckpointQuarantineMax    = 200
	CheckpointQuarantineIDsMax = 20000
)

// carriedByID is the reason of a quarantined order restored from a
// checkpoint's QuarantineIDs.
const carriedByID = "carried by id in the group's checkpoint: the next retry says why"

// Checkpoint reads the bookkeeping and every record in one read
// transaction. quiet is true when the outbox was empty at that moment:
// every event of every commit before it had been published, so the
// checkpoint and the stream up to that moment agree. A checkpoint that is
// not quiet must not be handed to a standby (its watermark is ahead of
// events the stream may never get).
func (s *Store) Checkpoint() (c Checkpoint, quiet bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		m, err := s.readMeta(tx.Bucket(bucketMeta))
		if err != nil {
			return err
		}
		c = Checkpoint{Watermark: m.Watermark, Baseline: m.Baseline, BaselineDone: m.BaselineDone, LastSweep: m.LastSweep, Records: map[string]json.RawMessage{}}
		quiet = tx.Bucket(bucketOutbox).Stats().KeyN == 0
		if err := tx.Bucket(bucketRecords).ForEach(func(k, v []byte) error {
			c.Records[string(k)] = append(json.RawMessage(nil), v...)
			return nil
		}); err != nil {
			return err
		}
		qs, err := s.readQuarantine(tx)
		if err != nil {
			return err
		}
		if len(qs) > CheckpointQuarantineMax {
			rest := qs[CheckpointQuarantineMax:min(len(qs), CheckpointQuarantineMax+CheckpointQuarantineIDsMax)]
			c.QuarantineIDs = make([]int64, len(rest))
			for i, q := range rest {
				c.QuarantineIDs[i] = q.OrderID
			}
			qs = qs[:CheckpointQuarantineMax]
		}
		c.Quarantine = qs
		return nil
	})
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("checkpoint of state file %s: %w", s.path, err)
	}
	return c, quiet, nil
}

// RestoreCheckpoint makes the bookkeeping the checkpoint's (the watermark
// may move back: reading again is idempotent) and replaces the records
// with its records, except those for which own returns true (this
// replica's own, kept as they are). The snapshot, outbox and token are
// untouched.
func (s *Store) RestoreCheckpoint(c Checkpoint, own func(name string) bool) error {
	err := s.update(false, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		for _, f := range []struct {
			key []byte
			t   time.Time
		}{{keyWatermark, c.Watermark}, {keyBaseline, c.Baseline}, {keyLastSweep, c.LastSweep}} {
			var err error
			if f.t.IsZero() {
				err = meta.Delete(f.key)
			} else {
				err = putTime(meta, f.key, f.t)
			}
			if err != nil {
				return err
			}
		}
		done := []byte{0}
		if c.BaselineDone {
			done[0] = 1
		}
		if err := meta.Put(keyBaselineDone, done); err != nil {
			return err
		}
		recs := tx.Bucket(bucketRecords)
		var stale [][]byte
		if err := recs.ForEach(func(k, _ []byte) error {
			if _, ok := c.Records[string(k)]; !ok && !own(string(k)) {
				stale = append(stale, append([]byte(nil), k...))
			}
			return nil
		}); err != nil {
			return err
		}
		for _, k := range stale {
			if err := recs.Delete(k); err != nil {
				return err
			}
		}
		for name, v := range c.Records {
			if own(name) || !json.Valid(v) {
				continue
			}
			if err := recs.Put([]byte(name), append([]byte(nil), v...)); err != nil {
				return err
			}
		}
		// The quarantine becomes the checkpoint's: the orders the active
		// held back are retried here.
		if err := tx.DeleteBucket(bucketQuarantine); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bucketQuarantine); err != nil {
			return err
		}
		ops := make([]QuarantineOp, 0, len(c.Quarantine)+len(c.QuarantineIDs))
		for i := range c.Quarantine {
			ops = append(ops, QuarantineOp{OrderID: c.Quarantine[i].OrderID, Entry: &c.Quarantine[i]})
		}
		for _, id := range c.QuarantineIDs {
			// No LastSeen: due for a retry at once.
			ops = append(ops, QuarantineOp{OrderID: id, Entry: &Quarantined{Reason: carriedByID}})
		}
		return putQuarantine(tx, ops)
	})
	if err != nil {
		return fmt.Errorf("restore a checkpoint into state file %s: %w", s.path, err)
	}
	return nil
}

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

// The snapshot dump: a version byte, then per order its 8-byte big-endian
// id, a uvarint length and the compact state (codec.go). Version 2 holds
// states of encoding version 2 (with statusSince), which a binary of dump
// version 1 cannot read; LoadOrders reads both.
const (
	dumpVersion  = 2
	dumpVersion1 = 1
)

// ErrNotQuiet: DumpOrders found events in the outbox (see Checkpoint).
var ErrNotQuiet = errors.New("outbox not empty")

// DumpOrders writes the whole snapshot to w, in one read transaction in
// which the outbox is empty (else ErrNotQuiet and nothing is written), and
// returns the number of orders.
func (s *Store) DumpOrders(w io.Writer) (n int, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketOutbox).Stats().KeyN != 0 {
			return ErrNotQuiet
		}
		if _, err := w.Write([]byte{dumpVersion}); err != nil {
			return err
		}
		buf := make([]byte, 0, 128)
		return tx.Bucket(bucketOrders).ForEach(func(k, v []byte) error {
			buf = append(append(buf[:0], k...), binary.AppendUvarint(nil, uint64(len(v)))...)
			buf = append(buf, v...)
			n++
			_, err := w.Write(buf)
			return err
		})
	})
	if err != nil {
		return 0, fmt.Errorf("dump the snapshot of state file %s: %w", s.path, err)
	}
	return n, nil
}

// LoadOrders replaces the whole snapshot with a dump of DumpOrders and
// writes the records, in one transaction. Every state is checked before
// anything is replaced.
func (s *Store) LoadOrders(r io.Reader, recs ...Record) (n int, err error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return 0, fmt.Errorf("read a snapshot dump: %w", err)
	}
	if len(b) == 0 || b[0] != dumpVersion && b[0] != dumpVersion1 {
		return 0, fmt.Errorf("snapshot dump: not version %d or %d", dumpVersion1, dumpVersion)
	}
	rd := bytes.NewReader(b[1:])
	type kv struct{ k, v []byte }
	var all []kv
	var st diff.State
	for rd.Len() > 0 {
		k := make([]byte, 8)
		if _, err := io.ReadFull(rd, k); err != nil {
			return 0, fmt.Errorf("snapshot dump: entry %d: %w", len(all), err)
		}
		l, err := binary.ReadUvarint(rd)
		if err != nil || l > uint64(rd.Len()) {
			return 0, fmt.Errorf("snapshot dump: entry %d: bad length", len(all))
		}
		v := make([]byte, l)
		_, _ = io.ReadFull(rd, v)
		if err := decodeState(v, &st); err != nil {
			return 0, fmt.Errorf("snapshot dump: order %d: %w", binary.BigEndian.Uint64(k), err)
		}
		all = append(all, kv{k, v})
	}
	err = s.update(false, func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketOrders); err != nil {
			return err
		}
		orders, err := tx.CreateBucket(bucketOrders)
		if err != nil {
			return err
		}
		orders.FillPercent = ordersFillPercent
		for _, e := range all {
			if err := orders.Put(e.k, e.v); err != nil {
				return err
			}
		}
		return putRecords(tx, recs)
	})
	if err != nil {
		return 0, fmt.Errorf("load a snapshot dump into state file %s: %w", s.path, err)
	}
	return len(all), nil
}

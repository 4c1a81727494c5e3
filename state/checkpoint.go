package state

import (
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// What a standby replica needs of the state file: the active replica's
// checkpoint (its bookkeeping and records) written into it (this file), the
// events of the stream applied to the snapshot and, when a replica stops
// being active, its unpublished outbox undone (mirrored.go), the active's
// snapshot dumped and loaded whole (dump.go).

// Checkpoint is the active replica's bookkeeping, as a standby takes it
// over: everything of the state file except the snapshot, the outbox and
// the token (the session moves with the shop only sealed, as plenty's
// record "session.sealed", a record like any other).
type Checkpoint struct {
	Watermark    time.Time `json:"watermark"`
	Baseline     time.Time `json:"baseline"`
	BaselineDone bool      `json:"baselineDone"`
	LastSweep    time.Time `json:"lastSweep"`
	// SyncStart is where the first sync began reading (Meta.SyncStart).
	SyncStart time.Time                  `json:"syncStart,omitzero"`
	Records   map[string]json.RawMessage `json:"records,omitempty"`
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
		c = Checkpoint{Watermark: m.Watermark, Baseline: m.Baseline, BaselineDone: m.BaselineDone, LastSweep: m.LastSweep, SyncStart: m.SyncStart, Records: map[string]json.RawMessage{}}
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
	return s.RestoreWith(c, Restore{Own: own})
}

// Restore says how RestoreWith treats the state file's records.
type Restore struct {
	// Own names the records of this file a checkpoint never replaces
	// (kept as they are).
	Own func(name string) bool
	// Merge, when set, decides each other record (of the checkpoint or
	// of the file) in the restore's transaction: ckpt is the checkpoint's
	// value (nil: none), file reads the file's records as they are before
	// the restore. For a name it handles (ok) merged is stored (nil: no
	// record); otherwise the checkpoint's replaces the file's. So what
	// only the file knows (a wait the service announced to this process
	// that never reached the group) survives the restore, whatever
	// instant the process dies at.
	Merge func(name string, ckpt json.RawMessage, file func(name string) json.RawMessage) (merged json.RawMessage, ok bool)
}

// RestoreWith is RestoreCheckpoint with the records treated as p says.
func (s *Store) RestoreWith(c Checkpoint, p Restore) error {
	if p.Own == nil {
		p.Own = func(string) bool { return false }
	}
	err := s.update(false, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		for _, f := range []struct {
			key []byte
			t   time.Time
		}{{keyWatermark, c.Watermark}, {keyBaseline, c.Baseline}, {keyLastSweep, c.LastSweep}, {keySyncStart, c.SyncStart}} {
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
		if err := restoreRecords(tx.Bucket(bucketRecords), c.Records, p); err != nil {
			return err
		}
		// The quarantine becomes the checkpoint's: the orders the active
		// held back are retried here.
		if err := tx.DeleteBucket(bucketQuarantine); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bucketQuarantine); err != nil {
			return err
		}
		// An id that is no order's (not positive: a damaged checkpoint) is
		// skipped: it must not block the takeover.
		ops := make([]QuarantineOp, 0, len(c.Quarantine)+len(c.QuarantineIDs))
		for i := range c.Quarantine {
			if c.Quarantine[i].OrderID > 0 {
				ops = append(ops, QuarantineOp{OrderID: c.Quarantine[i].OrderID, Entry: &c.Quarantine[i]})
			}
		}
		for _, id := range c.QuarantineIDs {
			if id > 0 {
				// No LastSeen: due for a retry at once.
				ops = append(ops, QuarantineOp{OrderID: id, Entry: &Quarantined{Reason: carriedByID}})
			}
		}
		return putQuarantine(tx, ops)
	})
	if err != nil {
		return fmt.Errorf("restore a checkpoint into state file %s: %w", s.path, err)
	}
	return nil
}

// restoreRecords makes the records those of the checkpoint (ckpt), as p
// says.
func restoreRecords(recs *bolt.Bucket, ckpt map[string]json.RawMessage, p Restore) error {
	file := map[string]json.RawMessage{}
	if err := recs.ForEach(func(k, v []byte) error {
		file[string(k)] = append(json.RawMessage(nil), v...)
		return nil
	}); err != nil {
		return err
	}
	names := map[string]bool{}
	for name := range file {
		names[name] = true
	}
	for name := range ckpt {
		names[name] = true
	}
	read := func(name string) json.RawMessage { return file[name] }
	for name := range names {
		if p.Own(name) {
			continue
		}
		v, ok := ckpt[name], false
		if p.Merge != nil {
			var merged json.RawMessage
			if merged, ok = p.Merge(name, v, read); ok {
				v = merged
			}
		}
		var err error
		if v == nil || !json.Valid(v) {
			if _, had := file[name]; had && (ok || v == nil) {
				err = recs.Delete([]byte(name))
			}
		} else {
			err = recs.Put([]byte(name), append([]byte(nil), v...))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

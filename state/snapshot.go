package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/orderwatch/orderwatch/diff"
)

// Lookup reads the snapshot states of ids in one read transaction: out[i] is
// the state of ids[i], nil when the order is unknown. The states are fresh
// values, owned by the caller.
func (s *Store) Lookup(ids []int64, out []*diff.State) error {
	if len(out) != len(ids) {
		return fmt.Errorf("lookup in state file %s: %d ids but %d result slots", s.path, len(ids), len(out))
	}
	states := make([]diff.State, len(ids))
	key := make([]byte, 8)
	err := s.db.View(func(tx *bolt.Tx) error {
		// One cursor for the page: Bucket.Get makes a new one per key.
		c := tx.Bucket(bucketOrders).Cursor()
		for i, id := range ids {
			binary.BigEndian.PutUint64(key, uint64(id))
			k, v := c.Seek(key)
			if v == nil || !bytes.Equal(k, key) {
				out[i] = nil
				continue
			}
			if err := decodeState(v, &states[i]); err != nil {
				return newFileError(ErrCorrupt, err, "state file %s: order %d", s.path, id)
			}
			out[i] = &states[i]
		}
		return nil
	})
	if err != nil {
		clear(out)
		return fmt.Errorf("lookup in state file %s: %w", s.path, err)
	}
	return nil
}

// Put is one order state of a Commit.
type Put struct {
	ID    int64
	State diff.State
}

// Commit is everything one page of a sweep writes.
type Commit struct {
	States       []Put         // snapshot states to write
	Events       []OutboxEntry // appended in order; Seq is ignored and assigned
	Watermark    *time.Time    // a verified slice ended here: advance (never moves back)
	BaselineDone bool          // the baseline sweep is complete (never unset)
	LastSweep    *time.Time    // a verified sweep ended now
	// Records are saved in the same transaction (see SaveRecord): what
	// must be true together with the watermark (e.g. clock evidence).
	Records []Record
	// Quarantine notes and releases undecodable orders (quarantine.go), in
	// the same transaction as the slice that read them.
	Quarantine []QuarantineOp
}

// Commit writes a page in one transaction: all of it or nothing. It fails
// with ErrOutboxFull, writing nothing, when Options.OutboxMax is set and the
// outbox would exceed it (an empty outbox takes any page, so a page larger
// than the limit cannot block the sweep forever). A Watermark before the
// stored one is ignored.
func (s *Store) Commit(c Commit) error {
	// Encode outside the transaction; bbolt keeps references to keys and
	// values until the commit, so each gets its own bytes (of one arena).
	keys := make([]byte, 8*(len(c.States)+len(c.Events)))
	vals := make([]byte, 0, 40*len(c.States)+outboxSize(c.Events))
	ends := make([]int, 0, len(c.States)+len(c.Events))
	for _, p := range c.States {
		vals = appendState(vals, &p.State)
		ends = append(ends, len(vals))
	}
	for _, e := range c.Events {
		vals = appendOutbox(vals, e)
		ends = append(ends, len(vals))
	}

	s.wmu.Lock()
	defer s.wmu.Unlock()
	depth := s.depth.Load()
	// A page whose events alone exceed the limit still goes into an empty
	// outbox: otherwise it could never be committed.
	if s.opt.OutboxMax > 0 && depth > 0 && depth+int64(len(c.Events)) > int64(s.opt.OutboxMax) {
		return newFileError(ErrOutboxFull, nil, "state file %s: outbox holds %d of at most %d entries, %d more do not fit", s.path, depth, s.opt.OutboxMax, len(c.Events))
	}
	err := s.update(true, func(tx *bolt.Tx) error {
		start, n := 0, 0
		next := func() (k, v []byte) {
			k, v = keys[8*n:8*n+8], vals[start:ends[n]]
			start = ends[n]
			n++
			return k, v
		}
		orders := tx.Bucket(bucketOrders)
		orders.FillPercent = ordersFillPercent
		for _, p := range c.States {
			k, v := next()
			binary.BigEndian.PutUint64(k, uint64(p.ID))
			if err := orders.Put(k, v); err != nil {
				return fmt.Errorf("order %d: %w", p.ID, err)
			}
		}
		outbox := tx.Bucket(bucketOutbox)
		outbox.FillPercent = outboxFillPercent
		for range c.Events {
			k, v := next()
			seq, err := outbox.NextSequence()
			if err != nil {
				return err
			}
			binary.BigEndian.PutUint64(k, seq)
			if err := outbox.Put(k, v); err != nil {
				return fmt.Errorf("outbox: %w", err)
			}
		}
		if err := s.putCommitMeta(tx.Bucket(bucketMeta), c); err != nil {
			return err
		}
		if err := putQuarantine(tx, c.Quarantine); err != nil {
			return err
		}
		return putRecords(tx, c.Records)
	})
	if err != nil {
		return fmt.Errorf("commit to state file %s: %w", s.path, err)
	}
	s.depth.Add(int64(len(c.Events)))
	return nil
}

// putCommitMeta writes a commit's watermark (never backwards), its
// first-sync mark and its last sweep's time.
func (s *Store) putCommitMeta(meta *bolt.Bucket, c Commit) error {
	if c.Watermark != nil && !c.Watermark.IsZero() {
		cur, err := getTime(meta, keyWatermark)
		if err != nil {
			return corruptError(s.path, err)
		}
		if c.Watermark.After(cur) {
			if err := putTime(meta, keyWatermark, *c.Watermark); err != nil {
				return err
			}
		}
	}
	if c.BaselineDone {
		if err := meta.Put(keyBaselineDone, []byte{1}); err != nil {
			return err
		}
	}
	if c.LastSweep != nil {
		return putTime(meta, keyLastSweep, *c.LastSweep)
	}
	return nil
}

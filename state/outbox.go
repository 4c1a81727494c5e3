package state

import (
	"encoding/binary"
	"fmt"
	"math"

	bolt "go.etcd.io/bbolt"
)

// OutboxEntry is an event waiting for its PubAck.
type OutboxEntry struct {
	Seq     uint64 // assigned by Commit, ascending
	ID      string // event id (the Nats-Msg-Id)
	Subject string // full subject
	Payload []byte // the encoded CloudEvent
}

// The outbox value: a version byte, the id and the subject as uvarint
// length and bytes, then the payload to the end.
const outboxVersion = 1

func outboxSize(events []OutboxEntry) int {
	n := 0
	for _, e := range events {
		n += 1 + 2*binary.MaxVarintLen16 + len(e.ID) + len(e.Subject) + len(e.Payload)
	}
	return n
}

func appendOutbox(dst []byte, e OutboxEntry) []byte {
	dst = append(dst, outboxVersion)
	dst = appendText(dst, e.ID)
	dst = appendText(dst, e.Subject)
	return append(dst, e.Payload...)
}

func decodeOutbox(k, v []byte) (OutboxEntry, error) {
	if len(k) != 8 {
		return OutboxEntry{}, fmt.Errorf("outbox key of %d bytes", len(k))
	}
	e := OutboxEntry{Seq: binary.BigEndian.Uint64(k)}
	d := decoder{b: v}
	if ver := d.byte(); d.err == nil && ver != outboxVersion {
		return e, fmt.Errorf("outbox entry %d: encoding version %d", e.Seq, ver)
	}
	e.ID = string(d.bytes())
	e.Subject = string(d.bytes())
	if d.err != nil {
		return e, fmt.Errorf("outbox entry %d: %w", e.Seq, d.err)
	}
	e.Payload = append([]byte(nil), d.b...)
	return e, nil
}

// Outbox returns up to max entries (max <= 0: all) with Seq > afterSeq, in
// Seq order. The entries are copies.
func (s *Store) Outbox(afterSeq uint64, max int) ([]OutboxEntry, error) {
	if afterSeq == math.MaxUint64 {
		return nil, nil
	}
	var out []OutboxEntry
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketOutbox).Cursor()
		for k, v := c.Seek(binary.BigEndian.AppendUint64(nil, afterSeq+1)); k != nil && (max <= 0 || len(out) < max); k, v = c.Next() {
			e, err := decodeOutbox(k, v)
			if err != nil {
				return corruptError(s.path, err)
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read outbox of state file %s: %w", s.path, err)
	}
	return out, nil
}

// OutboxLastSeq returns the highest Seq in the outbox, 0 when it is empty:
// every entry committed later has a higher one (the publisher tells
// entries an earlier process may have sent from those it cannot have).
func (s *Store) OutboxLastSeq() (uint64, error) {
	var last uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketOutbox).Cursor().Last(); len(k) == 8 {
			last = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("read outbox of state file %s: %w", s.path, err)
	}
	return last, nil
}

// DeleteOutbox removes acknowledged entries in one transaction; unknown
// sequences are ignored.
func (s *Store) DeleteOutbox(seqs ...uint64) error {
	if len(seqs) == 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	var deleted int64
	err := s.update(false, func(tx *bolt.Tx) error {
		deleted = 0
		b := tx.Bucket(bucketOutbox)
		key := make([]byte, 8)
		for _, seq := range seqs {
			binary.BigEndian.PutUint64(key, seq)
			if b.Get(key) == nil {
				continue
			}
			if err := b.Delete(key); err != nil {
				return err
			}
			deleted++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete from outbox of state file %s: %w", s.path, err)
	}
	s.depth.Add(-deleted)
	return nil
}

// OutboxDepth is the number of outbox entries, kept in memory (counted on
// Open): cheap enough for a metric scraped at any rate.
func (s *Store) OutboxDepth() int { return int(s.depth.Load()) }

// OutboxAdded is the outbox's sequence: how many events were ever added to
// it (never reset). Two readings that differ say events were added in
// between.
func (s *Store) OutboxAdded() (uint64, error) {
	var n uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketOutbox).Sequence()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("read state file %s: %w", s.path, err)
	}
	return n, nil
}

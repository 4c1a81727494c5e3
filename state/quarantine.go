package state

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Quarantined is an order whose entry the service sends but the watcher
// cannot decode: the sweep goes on past it (every other order keeps
// flowing) and retries this one until it decodes. Stored in the quarantine
// bucket under the order id, as JSON.
type Quarantined struct {
	OrderID int64 `json:"orderId"`
	// Reason is the decoding error as the decoder said it.
	Reason string `json:"reason"`
	// Excerpt is the start of the raw entry (order data only).
	Excerpt string `json:"excerpt"`
	// UpdatedAt is the entry's updatedAt as sent, when it could be read.
	UpdatedAt string    `json:"updatedAt,omitempty"`
	FirstSeen time.Time `json:"firstSeen"` // local clock
	LastSeen  time.Time `json:"lastSeen"`  // local clock
	// Attempts counts the reads that found the entry undecodable (sweeps
	// and retries by id).
	Attempts int `json:"attempts"`
	// RetryFailures counts the retries by id in a row that failed (the
	// service answered an error, not the order), and RetryNotBefore is
	// when the next may be made (local clock): a failing retry backs off
	// per order. Both are cleared when a read finds the entry again.
	RetryFailures  int       `json:"retryFailures,omitempty"`
	RetryNotBefore time.Time `json:"retryNotBefore,omitzero"`
}

// QuarantineOp is one change of a Commit to the quarantine: Entry notes
// the order as undecodable (again); RetryFailed notes a failed retry by id;
// neither releases it.
//
// A note of an order already quarantined keeps its FirstSeen and adds its
// Attempts to the stored ones, so a caller notes what it saw, not a total.
type QuarantineOp struct {
	OrderID int64
	Entry   *Quarantined
	// RetryFailed (with a nil Entry) notes that a retry by id failed: the
	// stored record takes its RetryFailures and RetryNotBefore and keeps
	// the rest. Nothing is noted for an order no longer quarantined.
	RetryFailed *RetryFailure
}

// RetryFailure is what a failed retry by id notes (see QuarantineOp).
type RetryFailure struct {
	Failures  int       // failed retries in a row, this one included
	NotBefore time.Time // no retry before (local clock)
}

// quarantineKey is the bucket key of an order id.
func quarantineKey(id int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(id)) }

// putQuarantine applies ops in order inside a write transaction.
func putQuarantine(tx *bolt.Tx, ops []QuarantineOp) error {
	if len(ops) == 0 {
		return nil
	}
	b := tx.Bucket(bucketQuarantine)
	for _, op := range ops {
		if op.OrderID <= 0 {
			return fmt.Errorf("quarantine: order id %d", op.OrderID)
		}
		k := quarantineKey(op.OrderID)
		if op.Entry == nil && op.RetryFailed != nil {
			old, err := decodeQuarantined(op.OrderID, b.Get(k))
			if err != nil || old == nil {
				continue // released meanwhile, or unreadable: the next note rewrites it
			}
			old.RetryFailures, old.RetryNotBefore = op.RetryFailed.Failures, op.RetryFailed.NotBefore
			v, err := json.Marshal(old)
			if err != nil {
				return fmt.Errorf("quarantine: order %d: %w", op.OrderID, err)
			}
			if err := b.Put(k, v); err != nil {
				return fmt.Errorf("quarantine: order %d: %w", op.OrderID, err)
			}
			continue
		}
		if op.Entry == nil {
			if err := b.Delete(k); err != nil {
				return fmt.Errorf("quarantine: order %d: %w", op.OrderID, err)
			}
			continue
		}
		q := *op.Entry
		q.OrderID = op.OrderID
		if old, err := decodeQuarantined(op.OrderID, b.Get(k)); err == nil && old != nil {
			if !old.FirstSeen.IsZero() && (q.FirstSeen.IsZero() || old.FirstSeen.Before(q.FirstSeen)) {
				q.FirstSeen = old.FirstSeen
			}
			q.Attempts += old.Attempts
		}
		v, err := json.Marshal(q)
		if err != nil {
			return fmt.Errorf("quarantine: order %d: %w", op.OrderID, err)
		}
		if err := b.Put(k, v); err != nil {
			return fmt.Errorf("quarantine: order %d: %w", op.OrderID, err)
		}
	}
	return nil
}

// decodeQuarantined reads a stored record; nil when v is nil. A record
// that does not decode is an error (the caller decides: Commit overwrites
// it, the readers report it with the order id and the reason "unreadable").
func decodeQuarantined(id int64, v []byte) (*Quarantined, error) {
	if v == nil {
		return nil, nil
	}
	var q Quarantined
	if err := json.Unmarshal(v, &q); err != nil {
		return nil, fmt.Errorf("quarantine record of order %d: %w", id, err)
	}
	q.OrderID = id
	return &q, nil
}

// Quarantine returns every quarantined order, by id. A record this binary
// cannot read is returned with its id and a reason saying so: the order
// stays visible and is retried like the others.
func (s *Store) Quarantine() ([]Quarantined, error) {
	var out []Quarantined
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = s.readQuarantine(tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read quarantine of state file %s: %w", s.path, err)
	}
	return out, nil
}

// readQuarantine lists the quarantine inside a transaction (Quarantine,
// Checkpoint).
func (s *Store) readQuarantine(tx *bolt.Tx) ([]Quarantined, error) {
	var out []Quarantined
	b := tx.Bucket(bucketQuarantine)
	if b == nil {
		return nil, nil
	}
	err := b.ForEach(func(k, v []byte) error {
		if len(k) != 8 {
			return corruptError(s.path, fmt.Errorf("quarantine key of %d bytes", len(k)))
		}
		id := int64(binary.BigEndian.Uint64(k))
		q, err := decodeQuarantined(id, v)
		if err != nil {
			q = &Quarantined{OrderID: id, Reason: "unreadable quarantine record: " + err.Error()}
		}
		out = append(out, *q)
		return nil
	})
	return out, err
}

// QuarantinedOrder returns one order's quarantine record; found is false
// when the order is not quarantined.
func (s *Store) QuarantinedOrder(id int64) (q Quarantined, found bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketQuarantine)
		if b == nil {
			return nil
		}
		v := b.Get(quarantineKey(id))
		if v == nil {
			return nil
		}
		found = true
		r, derr := decodeQuarantined(id, v)
		if derr != nil {
			r = &Quarantined{OrderID: id, Reason: "unreadable quarantine record: " + derr.Error()}
		}
		q = *r
		return nil
	})
	if err != nil {
		return Quarantined{}, false, fmt.Errorf("read quarantine of state file %s: %w", s.path, err)
	}
	return q, found, nil
}

// QuarantineCount is the number of quarantined orders (the gauge).
func (s *Store) QuarantineCount() (int, error) {
	n := 0
	err := s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketQuarantine); b != nil {
			n = b.Stats().KeyN
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("count quarantine of state file %s: %w", s.path, err)
	}
	return n, nil
}

package state

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Record is a named value a component keeps across restarts: the call
// budget, the waits the service announced, the sessions that may be open,
// the evidence of the service's clock, the timings in force. Value is
// stored as its encoding/json form; a nil Value deletes the record.
//
// Each component owns its names and its encoding: the state file only
// keeps the bytes, so that a new record needs no schema migration. A
// component must read an older or unknown form of its own record as
// "nothing known" (the safe side), never fail on it.
type Record struct {
	Name  string
	Value any
}

// SaveRecord stores one record (nil deletes it). It does not clear a
// pending WriteErr (only a Commit does).
func (s *Store) SaveRecord(name string, v any) error {
	if err := s.update(false, func(tx *bolt.Tx) error { return putRecords(tx, []Record{{Name: name, Value: v}}) }); err != nil {
		return fmt.Errorf("save record %q to state file %s: %w", name, s.path, err)
	}
	return nil
}

// SaveRecords saves recs in one transaction: all of them or none.
func (s *Store) SaveRecords(recs ...Record) error {
	if err := s.update(false, func(tx *bolt.Tx) error { return putRecords(tx, recs) }); err != nil {
		return fmt.Errorf("save records to state file %s: %w", s.path, err)
	}
	return nil
}

// LoadRecord decodes the record name into v; found is false (and v
// untouched) when there is none. A record that does not decode into v is an
// error that names it; the caller decides whether that is fatal.
func (s *Store) LoadRecord(name string, v any) (found bool, err error) {
	var raw []byte
	err = s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketRecords); b != nil {
			if val := b.Get([]byte(name)); val != nil {
				raw = append([]byte(nil), val...)
			}
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("load record %q from state file %s: %w", name, s.path, err)
	}
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("record %q in state file %s: %w", name, s.path, err)
	}
	return true, nil
}

// Records returns every record as stored (the state report, a replica's
// checkpoint). The values are copies.
func (s *Store) Records() (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRecords)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			out[string(k)] = append(json.RawMessage(nil), v...)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read records of state file %s: %w", s.path, err)
	}
	return out, nil
}

// putRecords writes records inside a write transaction.
func putRecords(tx *bolt.Tx, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	b := tx.Bucket(bucketRecords)
	for _, r := range recs {
		if r.Name == "" {
			return fmt.Errorf("record without a name")
		}
		if r.Value == nil {
			if err := b.Delete([]byte(r.Name)); err != nil {
				return err
			}
			continue
		}
		v, err := json.Marshal(r.Value)
		if err != nil {
			return fmt.Errorf("record %q: %w", r.Name, err)
		}
		if err := b.Put([]byte(r.Name), v); err != nil {
			return fmt.Errorf("record %q: %w", r.Name, err)
		}
	}
	return nil
}

package state

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Meta is the sweep's bookkeeping.
type Meta struct {
	SchemaVersion int
	Watermark     time.Time // last verified updatedAt upper bound; zero = never swept
	Baseline      time.Time // hi of the very first sweep; zero until the baseline sweep started
	BaselineDone  bool
	LastSweep     time.Time // when the last verified sweep ended (local clock)
	// SyncStart is where the first sync began reading, recorded with the
	// baseline (zero: not known, an earlier version): a process that
	// continues a first sync another began (a takeover inside it, a
	// restart) reads from there, not from its own start.
	SyncStart time.Time
}

// Meta reads the bookkeeping.
func (s *Store) Meta() (Meta, error) {
	var m Meta
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		m, err = s.readMeta(tx.Bucket(bucketMeta))
		return err
	})
	if err != nil {
		return Meta{}, fmt.Errorf("read state file %s: %w", s.path, err)
	}
	return m, nil
}

func (s *Store) readMeta(b *bolt.Bucket) (Meta, error) {
	var m Meta
	var err error
	if m.SchemaVersion, err = schemaVersion(b); err != nil {
		return m, corruptError(s.path, err)
	}
	for _, f := range []struct {
		key []byte
		dst *time.Time
	}{{keyWatermark, &m.Watermark}, {keyBaseline, &m.Baseline}, {keyLastSweep, &m.LastSweep}, {keySyncStart, &m.SyncStart}} {
		if *f.dst, err = getTime(b, f.key); err != nil {
			return m, corruptError(s.path, err)
		}
	}
	m.BaselineDone = len(b.Get(keyBaselineDone)) == 1 && b.Get(keyBaselineDone)[0] == 1
	return m, nil
}

func getTime(b *bolt.Bucket, key []byte) (time.Time, error) {
	v := b.Get(key)
	if v == nil {
		return time.Time{}, nil
	}
	var t time.Time
	if err := t.UnmarshalBinary(v); err != nil {
		return time.Time{}, fmt.Errorf("meta %s: %w", key, err)
	}
	return t, nil
}

func putTime(b *bolt.Bucket, key []byte, t time.Time) error {
	v, err := t.MarshalBinary()
	if err != nil {
		return fmt.Errorf("meta %s: %w", key, err)
	}
	return b.Put(key, v)
}

// SetBaseline records the upper bound of the very first sweep. It does
// nothing when a baseline is already recorded.
func (s *Store) SetBaseline(t time.Time) error { return s.SetBaselineFrom(time.Time{}, t) }

// SetBaselineFrom records the upper bound t of the very first sweep and
// where it began reading (start; zero: not recorded). It does nothing
// when a baseline is already recorded.
func (s *Store) SetBaselineFrom(start, t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("state file %s: zero baseline", s.path)
	}
	err := s.update(false, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta.Get(keyBaseline) != nil {
			return nil
		}
		if !start.IsZero() {
			if err := putTime(meta, keySyncStart, start); err != nil {
				return err
			}
		}
		return putTime(meta, keyBaseline, t)
	})
	if err != nil {
		return fmt.Errorf("set baseline in state file %s: %w", s.path, err)
	}
	return nil
}

// RewindWatermark moves the watermark back to t when it is later (a clock
// put it ahead of the service's time); the only way it moves back. The
// window from t on is read again, which is idempotent.
func (s *Store) RewindWatermark(t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("state file %s: zero watermark", s.path)
	}
	err := s.update(false, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		cur, err := getTime(meta, keyWatermark)
		if err != nil {
			return corruptError(s.path, err)
		}
		if !cur.After(t) {
			return nil
		}
		return putTime(meta, keyWatermark, t)
	})
	if err != nil {
		return fmt.Errorf("rewind the watermark in state file %s: %w", s.path, err)
	}
	return nil
}

package state

import (
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Stats describes the file for `watcher state` and metrics.
type Stats struct {
	Orders        int
	OutboxDepth   int
	Watermark     time.Time
	Baseline      time.Time
	BaselineDone  bool // the first sweep (the baseline) is complete
	LastSweep     time.Time
	FileSize      int64
	SchemaVersion int
}

// Stats counts the orders (a walk over the orders bucket's pages: cheap, but
// not for every page of a sweep) and reads the bookkeeping.
func (s *Store) Stats() (Stats, error) {
	var st Stats
	err := s.db.View(func(tx *bolt.Tx) error {
		m, err := s.readMeta(tx.Bucket(bucketMeta))
		if err != nil {
			return err
		}
		st.SchemaVersion, st.Watermark, st.Baseline, st.LastSweep = m.SchemaVersion, m.Watermark, m.Baseline, m.LastSweep
		st.BaselineDone = m.BaselineDone
		st.Orders = tx.Bucket(bucketOrders).Stats().KeyN
		st.OutboxDepth = tx.Bucket(bucketOutbox).Stats().KeyN
		return nil
	})
	if err != nil {
		return Stats{}, fmt.Errorf("stats of state file %s: %w", s.path, err)
	}
	fi, err := os.Stat(s.path)
	if err != nil {
		return Stats{}, fmt.Errorf("stats of state file %s: %w", s.path, err)
	}
	st.FileSize = fi.Size()
	return st, nil
}

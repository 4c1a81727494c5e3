package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	bolt "go.etcd.io/bbolt"

	"github.com/orderwatch/orderwatch/diff"
)

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

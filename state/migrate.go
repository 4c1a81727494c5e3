package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// migrations upgrade the schema from version N to N+1, all in the one Update
// transaction of Open; the version key is written after the last one.
var migrations = map[int]func(tx *bolt.Tx) error{
	// Version 0: files of early development builds, before the schema
	// version key: meta with the magic and the orders snapshot, no outbox.
	0: func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketOrders, bucketOutbox} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	},
	// Version 1 -> 2: named records that survive a restart (budget, waits,
	// sessions, clock evidence) and the quarantine of undecodable orders.
	1: func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketRecords, bucketQuarantine} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	},
}

// prepare recognises, initialises or migrates the file (read-write), or only
// recognises it (read-only).
func (s *Store) prepare(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		var names []string
		if err := tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			names = append(names, fmt.Sprintf("%q", name))
			return nil
		}); err != nil {
			return err
		}
		if len(names) > 0 {
			if len(names) > 5 {
				names = append(names[:5], "...")
			}
			return newFileError(ErrForeign, nil, "state file %s is a bbolt database of another application (buckets %s); refusing to use it: give orderwatch a file of its own (WATCHER_STATE_PATH)", s.path, strings.Join(names, ", "))
		}
		if s.opt.ReadOnly {
			return fmt.Errorf("state file %s was never initialised (start the watcher once)", s.path)
		}
		if !tx.Writable() {
			return errNeedsWrite
		}
		return initialise(tx)
	}
	if string(meta.Get(keyMagic)) != magic {
		return newFileError(ErrForeign, nil, "state file %s has a meta bucket but not orderwatch's identifier; refusing to use it: give orderwatch a file of its own (WATCHER_STATE_PATH)", s.path)
	}
	version, err := schemaVersion(meta)
	if err != nil {
		return corruptError(s.path, err)
	}
	switch {
	case version > SchemaVersion:
		return newFileError(ErrSchema, nil, "state file %s has schema version %d, this watcher knows up to %d: run a newer watcher (the file is left untouched; downgrading is not supported)", s.path, version, SchemaVersion)
	case version < SchemaVersion && s.opt.ReadOnly:
		return newFileError(ErrSchema, nil, "state file %s has schema version %d and needs a migration to %d: start the watcher once (read-only access never migrates)", s.path, version, SchemaVersion)
	}
	if version < SchemaVersion && !tx.Writable() {
		return errNeedsWrite
	}
	for v := version; v < SchemaVersion; v++ {
		m, ok := migrations[v]
		if !ok {
			return newFileError(ErrSchema, nil, "state file %s: no migration from schema version %d", s.path, v)
		}
		if err := m(tx); err != nil {
			return fmt.Errorf("state file %s: migrate schema version %d to %d: %w", s.path, v, v+1, err)
		}
	}
	if version < SchemaVersion {
		if err := meta.Put(keySchema, binary.BigEndian.AppendUint64(nil, SchemaVersion)); err != nil {
			return err
		}
	}
	if tx.Bucket(bucketOrders) == nil || tx.Bucket(bucketOutbox) == nil || tx.Bucket(bucketRecords) == nil || tx.Bucket(bucketQuarantine) == nil {
		return corruptError(s.path, errors.New("orders, outbox, records or quarantine bucket missing"))
	}
	return nil
}

func initialise(tx *bolt.Tx) error {
	meta, err := tx.CreateBucket(bucketMeta)
	if err != nil {
		return err
	}
	if err := meta.Put(keyMagic, []byte(magic)); err != nil {
		return err
	}
	if err := meta.Put(keySchema, binary.BigEndian.AppendUint64(nil, SchemaVersion)); err != nil {
		return err
	}
	for _, name := range [][]byte{bucketOrders, bucketOutbox, bucketRecords, bucketQuarantine} {
		if _, err := tx.CreateBucket(name); err != nil {
			return err
		}
	}
	return nil
}

func schemaVersion(meta *bolt.Bucket) (int, error) {
	v := meta.Get(keySchema)
	if v == nil {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("schema version value of %d bytes", len(v))
	}
	n := binary.BigEndian.Uint64(v)
	if n > math.MaxInt32 {
		return 0, fmt.Errorf("schema version %d", n)
	}
	return int(n), nil
}

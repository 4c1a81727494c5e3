// Package state is orderwatch's state file: a bbolt database holding the
// schema version, the sweep's watermark and baseline, the service token, the
// snapshot of every order's tracked state and the transactional outbox of
// events not yet acknowledged by NATS.
//
// A page of the sweep is one View (Lookup: the previous states) and one
// Update (Commit: the new states, their events and, when a verified slice
// ends, the watermark), so a crash never separates a snapshot change from
// the events it produced.
//
// Buckets:
//
//	meta    magic, schema_version, watermark, baseline, baseline_done,
//	        last_sweep, token
//	orders  8-byte big-endian order id -> compact state (codec.go)
//	outbox  8-byte big-endian sequence -> event (id, subject, payload)
//	records name -> a component's JSON record that must survive a restart
//	        (records.go: call budget, pending waits, sessions, clock
//	        evidence, timings)
//	quarantine 8-byte big-endian order id -> why the order's entry could
//	        not be decoded (schema version 2)
package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty/order"
)

// SchemaVersion is the layout version this binary writes. Older files are
// migrated on Open (see migrations); newer files are refused.
const SchemaVersion = 2

// magic identifies a state file of orderwatch.
const magic = "orderwatch.state"

var (
	bucketMeta       = []byte("meta")
	bucketOrders     = []byte("orders")
	bucketOutbox     = []byte("outbox")
	bucketRecords    = []byte("records")
	bucketQuarantine = []byte("quarantine")

	keyMagic        = []byte("magic")
	keySchema       = []byte("schema_version")
	keyWatermark    = []byte("watermark")
	keyBaseline     = []byte("baseline")
	keyBaselineDone = []byte("baseline_done")
	keyLastSweep    = []byte("last_sweep")
	keyToken        = []byte("token")
)

// Fill percents: order ids arrive mostly ascending (new orders get higher
// ids) and outbox sequences strictly ascending, so pages are filled almost
// completely instead of bbolt's default half.
const (
	ordersFillPercent = 0.95
	outboxFillPercent = 1.0
)

// Sentinel errors; the wrapped errors name the file.
var (
	// ErrLocked: another process (or another Open in this one) holds the file lock.
	ErrLocked = errors.New("state file locked")
	// ErrCorrupt: not a bbolt database, or damaged. The file is never reset.
	ErrCorrupt = errors.New("state file corrupt")
	// ErrForeign: a bbolt database that is not an orderwatch state file.
	ErrForeign = errors.New("not an orderwatch state file")
	// ErrOutboxFull: Commit would exceed Options.OutboxMax; nothing was written.
	ErrOutboxFull = errors.New("outbox full")
	// ErrSchema: the schema version is newer than this binary knows, or (read
	// only) older and not yet migrated.
	ErrSchema = errors.New("unsupported state schema version")
	// ErrNotWritable: a write transaction could not be stored (disk full,
	// read-only filesystem, failing storage); nothing of it was stored.
	ErrNotWritable = errors.New("state file not writable")
)

// errNeedsWrite: Open's read-only look found that the file must be
// initialised or migrated.
var errNeedsWrite = errors.New("state file needs initialising or migrating")

// Options configure Open.
type Options struct {
	Timeout   time.Duration // how long to wait for the file lock; default 1s
	ReadOnly  bool          // shared lock, no writes, no initialisation or migration (`watcher state`)
	OutboxMax int           // outbox entries at most; 0 = unlimited
	NoSync    bool          // no fsync: tests and benchmarks only
	// OnWritable, when set, is told when writes start failing (the error)
	// and when a commit works again (nil); once per change, not per write.
	// Not called during Open (its errors are Open's).
	OnWritable func(err error)
}

// Store is an open state file. Its methods are safe for concurrent use (the
// poller commits while the publisher drains the outbox).
type Store struct {
	db   *bolt.DB
	path string
	opt  Options

	wmu   sync.Mutex   // serialises Commit and DeleteOutbox so that depth is exact
	depth atomic.Int64 // outbox entries

	umu        sync.Mutex            // serialises update: WriteErr and onWritable follow the order of the writes
	writeErr   atomic.Pointer[error] // the last failed write, until a commit succeeds
	onWritable func(error)           // Options.OnWritable, set once Open is done
}

// fileError is an error about the state file: a message for the operator
// that names the file, matching a sentinel and the cause with errors.Is.
type fileError struct {
	msg  string
	errs []error
}

func (e *fileError) Error() string   { return e.msg }
func (e *fileError) Unwrap() []error { return e.errs }

func newFileError(kind error, cause error, format string, args ...any) error {
	e := &fileError{msg: fmt.Sprintf(format, args...), errs: []error{kind}}
	if cause != nil {
		e.msg += ": " + cause.Error()
		e.errs = append(e.errs, cause)
	}
	return e
}

// Open opens the state file at path, creating and initialising it when it
// does not exist or is empty, and migrating an older schema in one
// transaction. It fails with ErrLocked, ErrCorrupt, ErrForeign or ErrSchema
// (all naming the file); it never resets or overwrites a file it cannot use.
func Open(path string, opt Options) (*Store, error) {
	if opt.Timeout == 0 {
		opt.Timeout = time.Second
	}
	if opt.OutboxMax < 0 {
		return nil, fmt.Errorf("state file %s: negative outbox limit %d", path, opt.OutboxMax)
	}
	if opt.ReadOnly {
		// bbolt would try to initialise an empty file, which a read-only
		// open must not do.
		fi, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("state file %s: %w", path, err)
		}
		if fi.Size() == 0 {
			return nil, fmt.Errorf("state file %s is empty: it was never initialised (start the watcher once)", path)
		}
	}
	db, err := openBolt(path, &bolt.Options{
		Timeout:    opt.Timeout,
		ReadOnly:   opt.ReadOnly,
		NoSync:     opt.NoSync,
		NoGrowSync: opt.NoSync,
	})
	if err != nil {
		return nil, openError(path, err)
	}
	s := &Store{db: db, path: path, opt: opt}
	// A look first, and a write only when the file must be initialised or
	// migrated: a watcher restarted on a full disk opens its file, stays
	// not ready and recovers once the disk has room.
	prepare := func(tx *bolt.Tx) error { return s.prepare(tx) }
	err = guard(path, func() error { return db.View(prepare) })
	if errors.Is(err, errNeedsWrite) {
		err = guard(path, func() error { return s.update(true, prepare) })
	}
	if err == nil {
		err = guard(path, func() error {
			return db.View(func(tx *bolt.Tx) error {
				s.depth.Store(int64(tx.Bucket(bucketOutbox).Stats().KeyN))
				return nil
			})
		})
	}
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	s.onWritable = opt.OnWritable
	return s, nil
}

// openBolt is bolt.Open, turning a panic on a damaged file (bbolt reads the
// freelist while opening) into an error. The file's lock is released and the
// file closed; bbolt's mapping of the damaged file is not reclaimed.
func openBolt(path string, o *bolt.Options) (db *bolt.DB, err error) {
	var file *os.File
	o.OpenFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, perm)
		file = f
		return f, err
	}
	defer func() {
		if r := recover(); r != nil {
			if file != nil {
				unlockFile(file)
				_ = file.Close()
			}
			db, err = nil, fmt.Errorf("bbolt panicked: %v", r)
		}
	}()
	return bolt.Open(path, 0o600, o)
}

// openError classifies an error of bolt.Open.
func openError(path string, err error) error {
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return newFileError(ErrLocked, nil, "state file %s is locked by another process (another watcher running?)", path)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum),
		errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrInvalidMapping),
		strings.Contains(err.Error(), "file size too small"), strings.Contains(err.Error(), "bbolt panicked"):
		return corruptError(path, err)
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS), errors.Is(err, syscall.ENOSPC):
		return newFileError(ErrNotWritable, err, "state file %s cannot be opened for writing: check that its filesystem is writable and the permissions of the file and its directory", path)
	default:
		return fmt.Errorf("open state file %s: %w", path, err)
	}
}

func corruptError(path string, cause error) error {
	return newFileError(ErrCorrupt, cause,
		"state file %s is not a valid bbolt database or is damaged; it was left untouched: "+
			"restore a backup, or move it aside to start over (the watcher then records a new baseline)", path)
}

// guard turns a panic of bbolt on a damaged file into ErrCorrupt; bbolt
// rolls the managed transaction back before the panic reaches here.
func guard(path string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = corruptError(path, fmt.Errorf("bbolt panicked: %v", r))
		}
	}()
	return fn()
}

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

// update runs fn in a write transaction. When fn succeeds but storing the
// transaction fails (disk full, read-only filesystem, I/O error), the error
// is an ErrNotWritable and is remembered for WriteErr. bbolt writes the meta
// page last, so a transaction that failed before it left the file as it
// was. One whose meta page was written but not synced (fdatasync failed)
// is visible all the same, in this process and maybe on disk: it counts as
// done (the caller's bookkeeping must follow it: a retry would apply it
// twice), and WriteErr stays set because it may not survive a crash.
//
// Only a successful write that clears (Commit: the write the sweep waits
// for) clears WriteErr: on a full disk small transactions that reuse freed
// pages succeed while a commit that needs new pages fails.
func (s *Store) update(clears bool, fn func(*bolt.Tx) error) error {
	s.umu.Lock()
	defer s.umu.Unlock()
	var fnErr error
	var txid int
	ran := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		ran, txid = true, tx.ID()
		fnErr = fn(tx)
		return fnErr
	})
	if err != nil && (!ran || fnErr != nil) {
		return err // not a storage failure
	}
	if err != nil {
		cause := err
		err = newFileError(ErrNotWritable, cause, "not writable (disk full, read-only filesystem or failing storage?)")
		landed := false
		_ = s.db.View(func(tx *bolt.Tx) error { landed = tx.ID() >= txid; return nil })
		if s.writeErr.Swap(&err) == nil && s.onWritable != nil {
			s.onWritable(err)
		}
		if landed {
			return nil
		}
		return err
	}
	if clears && s.writeErr.Swap(nil) != nil && s.onWritable != nil {
		s.onWritable(nil)
	}
	return nil
}

// WriteErr is the failure of the last failed write transaction, until a
// Commit succeeds (nil when none failed): the watcher is not ready while it
// is set.
func (s *Store) WriteErr() error {
	if p := s.writeErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Close closes the file and releases its lock.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close state file %s: %w", s.path, err)
	}
	return nil
}

// Path returns the file's path.
func (s *Store) Path() string { return s.path }

// Meta is the sweep's bookkeeping.
type Meta struct {
	SchemaVersion int
	Watermark     time.Time // last verified updatedAt upper bound; zero = never swept
	Baseline      time.Time // hi of the very first sweep; zero until the baseline sweep started
	BaselineDone  bool
	LastSweep     time.Time // when the last verified sweep ended (local clock)
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
	}{{keyWatermark, &m.Watermark}, {keyBaseline, &m.Baseline}, {keyLastSweep, &m.LastSweep}} {
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
// nothing when a baseline is already recorded: the baseline never moves.
func (s *Store) SetBaseline(t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("state file %s: zero baseline", s.path)
	}
	err := s.update(false, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta.Get(keyBaseline) != nil {
			return nil
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

// OutboxEntry is an event waiting for its PubAck.
type OutboxEntry struct {
	Seq     uint64 // assigned by Commit, ascending
	ID      string // event id (the Nats-Msg-Id)
	Subject string // full subject
	Payload []byte // the encoded CloudEvent
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
		meta := tx.Bucket(bucketMeta)
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
			if err := putTime(meta, keyLastSweep, *c.LastSweep); err != nil {
				return err
			}
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

// storedToken is the token's encoding in meta.
type storedToken struct {
	AccessToken  string    `json:"accessToken"`
	RefreshToken string    `json:"refreshToken,omitempty"`
	TokenType    string    `json:"tokenType,omitempty"`
	ExpiresAt    time.Time `json:"expiresAt"`
}

// LoadToken returns the persisted session token, or the zero Token. It
// implements plenty.TokenStore (checked in token_test.go: state does not
// import the HTTP client).
func (s *Store) LoadToken(ctx context.Context) (order.Token, error) {
	if err := ctx.Err(); err != nil {
		return order.Token{}, err
	}
	var t order.Token
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketMeta).Get(keyToken)
		if v == nil {
			return nil
		}
		var st storedToken
		if err := json.Unmarshal(v, &st); err != nil {
			return corruptError(s.path, fmt.Errorf("token: %w", err))
		}
		t = order.Token(st)
		return nil
	})
	if err != nil {
		return order.Token{}, fmt.Errorf("load token from state file %s: %w", s.path, err)
	}
	return t, nil
}

// SaveToken persists the session token; the zero Token clears it.
func (s *Store) SaveToken(ctx context.Context, t order.Token) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.update(false, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if t == (order.Token{}) {
			return meta.Delete(keyToken)
		}
		v, err := json.Marshal(storedToken(t))
		if err != nil {
			return err
		}
		return meta.Put(keyToken, v)
	})
	if err != nil {
		return fmt.Errorf("save token to state file %s: %w", s.path, err)
	}
	return nil
}

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

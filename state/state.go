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
//	orders  8-byte big-endian order id -> compact state with the time
//	        the order entered its status (codec.go)
//	outbox  8-byte big-endian sequence -> event (id, subject, payload)
//	records name -> a component's JSON record that must survive a restart
//	        (records.go: call budget, pending waits, sessions, clock
//	        evidence, timings)
//	quarantine 8-byte big-endian order id -> why the order's entry could
//	        not be decoded (schema version 2)
package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// SchemaVersion is the layout version this binary writes. Older files are
// migrated on Open (see migrations); newer files are refused.
const SchemaVersion = 3

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
	keySyncStart    = []byte("sync_start")
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
	// lockID names the file whose lock the store holds (LockID).
	lockID string
	opt    Options

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

func (e *fileError) Error() string { return e.msg }

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
	s := &Store{db: db, path: path, opt: opt, lockID: lockID(path)}
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

// LockID names the file this store holds the lock of (device and inode):
// a process that holds it knows that every earlier process on this file is
// gone, and a copy of the file has another ("" where the system does not
// tell).
func (s *Store) LockID() string { return s.lockID }

// lockID is the identity of the file at path (just locked by Open).
func lockID(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	return fileIdentity(f)
}

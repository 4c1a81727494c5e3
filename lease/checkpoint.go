package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Checkpoint is what the active replica writes after each committed sweep
// (in a bucket without TTL, under the lease's key): who wrote it (Writer),
// the last stream sequence whose event it reflects, and its state (opaque
// here).
type Checkpoint struct {
	Epoch    uint64    `json:"epoch"` // the lease revision of the writer's tenure
	Instance string    `json:"instance"`
	Nonce    string    `json:"nonce"`
	File     string    `json:"file,omitempty"` // the writer's state file (Config.File)
	Written  time.Time `json:"written"`
	Seq      uint64    `json:"seq"` // every event up to this stream sequence is reflected
	// Stream is the stream's creation time (server clock) when Seq was
	// read: the incarnation Seq counts in (a stream deleted and created
	// again starts at 1). Zero: not known (an older writer).
	Stream time.Time       `json:"stream,omitzero"`
	State  json.RawMessage `json:"state"`
	// Stamp is when the server stored it (its clock; set by Read).
	Stamp time.Time `json:"-"`
	// Shop and ShopID name the writer's shop (Config.Shop and ShopID of
	// its lease; opaque here).
	Shop   string `json:"shop,omitempty"`
	ShopID string `json:"shopId,omitempty"`
}

// Writer names who wrote a checkpoint: the process (instance and its
// random nonce), its state file and its tenure (the lease revision it
// began at). A revision alone names nothing: revisions start at 1 again
// in a lease bucket created again; a nonce is never reused.
type Writer struct {
	Instance string `json:"instance"`
	Nonce    string `json:"nonce"`
	File     string `json:"file,omitempty"`
	Epoch    uint64 `json:"epoch"`
}

// Writer is who wrote cp.
func (cp Checkpoint) Writer() Writer {
	return Writer{Instance: cp.Instance, Nonce: cp.Nonce, File: cp.File, Epoch: cp.Epoch}
}

// ErrCorrupt is returned (wrapped) by Read for a value that does not
// decode. The group's bookkeeping is lost then; Write overwrites it.
var ErrCorrupt = errors.New("checkpoint does not decode")

// ErrNotWriter is returned (wrapped in a *ForeignError) by Write when the
// checkpoint was written by another holder and the lease is not this
// process's on the server: another replica is active. Write has demoted
// the lease (OnChange(false), Gate fails) before it returns.
var ErrNotWriter = errors.New("the group's checkpoint was written by another holder: this replica is not the active one")

// ForeignError is ErrNotWriter with the writer found.
type ForeignError struct{ Writer Writer }

func (e *ForeignError) Error() string {
	return fmt.Sprintf("%v (written by %s, nonce %s, tenure %d)", ErrNotWriter, e.Writer.Instance, e.Writer.Nonce, e.Writer.Epoch)
}

func (e *ForeignError) Unwrap() error { return ErrNotWriter }

// Checkpoints reads and writes the checkpoints of one group.
type Checkpoints struct {
	kv   jetstream.KeyValue
	key  string
	rev  uint64     // the revision this process read or wrote last
	last Checkpoint // the checkpoint this process wrote last
	memo *readMemo  // Memo: the first read's answer, kept
}

// readMemo is a read kept by Memo.
type readMemo struct {
	read  bool
	rev   uint64
	cp    Checkpoint
	found bool
	err   error // nil or an ErrCorrupt
}

// Memo makes Read answer with what it read first until end is called or a
// write: a takeover reads the group's checkpoint once (three reads, one
// round trip each, before). The caller holds the lease: no other tenure
// writes a checkpoint meanwhile, and one in flight from an earlier tenure
// is found by the tenure's first write (on the revision read, see Write).
// Not for concurrent use, like the rest of Checkpoints.
func (c *Checkpoints) Memo() (end func()) {
	m := &readMemo{}
	c.memo = m
	return func() {
		if c.memo == m {
			c.memo = nil
		}
	}
}

// CheckpointBucket returns the checkpoint bucket, creating it when missing
// (one value per key, no TTL: a checkpoint outlives every replica), and
// again whenever it is found gone (bucket.go).
func CheckpointBucket(ctx context.Context, js jetstream.JetStream, name string, opts ...BucketOption) (jetstream.KeyValue, error) {
	return keyValue(ctx, js, jetstream.KeyValueConfig{
		Bucket:      name,
		Description: "orderwatch: the active replica's checkpoint (key per shop and stream)",
		History:     1,
		Storage:     jetstream.FileStorage,
	}, options(opts))
}

// NewCheckpoints returns the checkpoints under key.
func NewCheckpoints(kv jetstream.KeyValue, key string) *Checkpoints {
	return &Checkpoints{kv: kv, key: key}
}

// Revision is the revision this process read or wrote last.
func (c *Checkpoints) Revision() uint64 { return c.rev }

// Last is the checkpoint this process wrote last.
func (c *Checkpoints) Last() Checkpoint { return c.last }

// Read returns the latest checkpoint (found false when none was written,
// or it was deleted or purged). A value that does not decode is an error
// wrapping ErrCorrupt.
func (c *Checkpoints) Read(ctx context.Context) (cp Checkpoint, found bool, err error) {
	m := c.memo
	if m != nil && m.read {
		c.rev = m.rev
		return m.cp, m.found, m.err
	}
	cp, found, err = c.read(ctx)
	if m != nil && (err == nil || errors.Is(err, ErrCorrupt)) {
		*m = readMemo{read: true, rev: c.rev, cp: cp, found: found, err: err}
	}
	return cp, found, err
}

func (c *Checkpoints) read(ctx context.Context) (cp Checkpoint, found bool, err error) {
	e, err := c.kv.Get(ctx, c.key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		c.rev = 0
		return Checkpoint{}, false, nil
	}
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("read checkpoint %s: %w", c.key, err)
	}
	c.rev = e.Revision()
	if err := json.Unmarshal(e.Value(), &cp); err != nil {
		return Checkpoint{}, false, fmt.Errorf("read checkpoint %s (revision %d): %w: %w", c.key, e.Revision(), ErrCorrupt, err)
	}
	cp.Stamp = e.Created()
	return cp, true, nil
}

// Write stores a checkpoint of the lease's current tenure, on the revision
// this process read or wrote last: a checkpoint that a demoted active had
// in flight cannot overwrite its successor's. It writes nothing when the
// lease is not held (Gate) and returns ErrNotActive then.
//
// When the key is not at that revision any more, Write reads it again:
//   - gone (deleted, purged, its bucket created again): created anew;
//   - a value that does not decode, or this tenure's own (an answer lost):
//     overwritten on its revision;
//   - another holder's: overwritten when the lease on the server is still
//     this process's (a checkpoint a predecessor had in flight, or an
//     operator's put); otherwise another replica is active: the lease is
//     demoted at once and a *ForeignError (ErrNotWriter) returned.
func (c *Checkpoints) Write(ctx context.Context, l *Lease, seq uint64, state any) error {
	return c.WriteAt(ctx, l, seq, time.Time{}, state)
}

// WriteAt is Write with the incarnation of the stream seq counts in (its
// creation time, see Checkpoint.Stream).
func (c *Checkpoints) WriteAt(ctx context.Context, l *Lease, seq uint64, stream time.Time, state any) error {
	if err := l.Gate(); err != nil {
		return err
	}
	c.memo = nil // a conflict reads the key again; after a write, the write is known
	st, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("write checkpoint %s: %w", c.key, err)
	}
	me := l.Writer()
	cp := Checkpoint{Epoch: me.Epoch, Instance: me.Instance, Nonce: me.Nonce, File: me.File, Written: l.cfg.Now().UTC(), Seq: seq, Stream: stream, State: st}
	cp.Shop, cp.ShopID = l.cfg.Shop, l.cfg.ShopID
	b, _ := json.Marshal(cp)
	for try := 0; ; try++ {
		if err := l.Gate(); err != nil {
			return err
		}
		var rev uint64
		if c.rev == 0 {
			rev, err = c.kv.Create(ctx, c.key, b)
		} else {
			rev, err = c.kv.Update(ctx, c.key, b, c.rev)
		}
		if err == nil {
			c.rev, c.last = rev, cp
			return nil
		}
		conflict := errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) ||
			errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted)
		if !conflict || try >= 3 {
			return fmt.Errorf("write checkpoint %s: %w", c.key, err)
		}
		cur, found, rerr := c.Read(ctx)
		switch {
		case errors.Is(rerr, ErrCorrupt):
			l.log.Warn("the group's checkpoint does not decode: overwritten", "key", c.key, "err", rerr)
		case rerr != nil:
			return fmt.Errorf("write checkpoint %s: %w", c.key, rerr)
		case !found:
			l.log.Warn("the group's checkpoint is gone (deleted or purged): written anew", "key", c.key)
		case cur.Writer() == me:
		default:
			v, held, herr := l.Holder(ctx)
			if herr != nil {
				return fmt.Errorf("write checkpoint %s: %w", c.key, herr)
			}
			if !held || !l.Mine(v) {
				err := &ForeignError{Writer: cur.Writer()}
				l.demote(err.Error())
				return fmt.Errorf("write checkpoint %s: %w", c.key, err)
			}
			// Still ours on the server: a predecessor's write that was in
			// flight, or an operator's; this tenure's supersedes it.
		}
	}
}

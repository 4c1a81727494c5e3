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
// (in a bucket without TTL, under the lease's key): who wrote it in which
// tenure, the last stream sequence whose event it reflects, and its state
// (opaque here).
type Checkpoint struct {
	Epoch    uint64          `json:"epoch"` // the lease revision of the writer's tenure
	Instance string          `json:"instance"`
	Nonce    string          `json:"nonce"`
	Written  time.Time       `json:"written"`
	Seq      uint64          `json:"seq"` // every event up to this stream sequence is reflected
	State    json.RawMessage `json:"state"`
}

// Checkpoints reads and writes the checkpoints of one group.
type Checkpoints struct {
	kv  jetstream.KeyValue
	key string
	rev uint64 // the revision this process read or wrote last
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

// Read returns the latest checkpoint (found false when none was written).
func (c *Checkpoints) Read(ctx context.Context) (cp Checkpoint, found bool, err error) {
	e, err := c.kv.Get(ctx, c.key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return Checkpoint{}, false, nil
	}
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("read checkpoint %s: %w", c.key, err)
	}
	if err := json.Unmarshal(e.Value(), &cp); err != nil {
		return Checkpoint{}, false, fmt.Errorf("read checkpoint %s: %w", c.key, err)
	}
	c.rev = e.Revision()
	return cp, true, nil
}

// Write stores a checkpoint of the lease's current tenure, on the revision
// this process read or wrote last: a checkpoint that a demoted active had
// in flight cannot overwrite its successor's. It writes nothing when the
// lease is not held (Gate) and returns ErrNotActive then.
func (c *Checkpoints) Write(ctx context.Context, l *Lease, seq uint64, state any) error {
	if err := l.Gate(); err != nil {
		return err
	}
	st, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("write checkpoint %s: %w", c.key, err)
	}
	b, _ := json.Marshal(Checkpoint{Epoch: l.Epoch(), Instance: l.cfg.Instance, Nonce: l.nonce, Written: l.cfg.Now().UTC(), Seq: seq, State: st})
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
			c.rev = rev
			return nil
		}
		if try == 0 && (errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)) {
			// Written by a predecessor since this process looked: this
			// tenure's checkpoint supersedes it.
			if _, _, rerr := c.Read(ctx); rerr == nil {
				continue
			}
		}
		return fmt.Errorf("write checkpoint %s: %w", c.key, err)
	}
}

package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/state"
)

// Starting over is an operation of the whole group (watcher reset): a new
// state file alone continues from the group's checkpoint (its watermark,
// baseline and records win over WATCHER_START_FROM, logged as such), so
// the group's checkpoint and snapshot dump are cleared in NATS, and the
// replicas' state files deleted, while no replica runs.

// ResetOptions says what Reset may do.
type ResetOptions struct {
	// Force clears even while a replica holds the lease (it writes its
	// next checkpoint again: stop it first).
	Force bool
	// Lease deletes the lease too (a replica that holds it loses it).
	Lease bool
}

// ResetReport says what Reset found and cleared.
type ResetReport struct {
	Keys        []string    // the keys looked at (the shop's, and the earlier version's when different)
	Holder      lease.Value // who held the lease (Instance "" none)
	Checkpoints []string    // keys whose checkpoint was deleted
	Dumps       []string    // snapshot dumps deleted
	Leases      []string    // leases deleted
}

// ErrActive is returned by Reset when a replica holds the group's lease
// and ResetOptions.Force is not set; nothing was cleared.
var ErrActive = errors.New("a replica of the group is active")

// Reset clears the group's checkpoint and snapshot dump (and, with
// opt.Lease, its lease) under each of keys in the buckets <bucket>_lease,
// _checkpoint and _snapshot. Buckets that do not exist hold nothing; none
// is created or deleted.
func Reset(ctx context.Context, nc *nats.Conn, bucket string, keys []string, opt ResetOptions) (ResetReport, error) {
	rep := ResetReport{Keys: keys}
	h, err := existing(ctx, nc, bucket)
	if err != nil {
		return rep, err
	}
	for _, key := range keys {
		if h.lease == nil {
			break
		}
		v, found, err := lease.New(h.lease, time.Second, lease.Config{Key: key}).Holder(ctx)
		if err != nil {
			return rep, err
		}
		if found {
			rep.Holder = v
			if !opt.Force {
				return rep, fmt.Errorf("%w: %s (host %s) holds the lease %s since %s: stop every replica first, or force it",
					ErrActive, v.Instance, v.Host, key, v.Since.Format(time.RFC3339))
			}
		}
	}
	// The group's limits stay (below), under the key the group uses after
	// the reset: the shop's (keys[0]), where an earlier version's are
	// carried over.
	if h.ckpt != nil && len(keys) > 1 {
		if err := carryLimits(ctx, h.ckpt, keys[1:], keys[0]); err != nil {
			return rep, err
		}
	}
	for _, key := range keys {
		if ok, err := purge(ctx, h.ckpt, key); err != nil {
			return rep, fmt.Errorf("checkpoint %s: %w", key, err)
		} else if ok {
			rep.Checkpoints = append(rep.Checkpoints, key)
		}
		// The group's waits, sessions and budget (key <key>.limits,
		// limits.go) stay: they are the shop's quota, not the group's
		// position, and bind whoever calls next.
		if h.dumps != nil {
			switch err := h.dumps.Delete(ctx, key); {
			case err == nil:
				rep.Dumps = append(rep.Dumps, key)
			case !errors.Is(err, jetstream.ErrObjectNotFound):
				return rep, fmt.Errorf("snapshot dump %s: %w", key, err)
			}
		}
		if opt.Lease {
			if ok, err := purge(ctx, h.lease, key); err != nil {
				return rep, fmt.Errorf("lease %s: %w", key, err)
			} else if ok {
				rep.Leases = append(rep.Leases, key)
			}
		}
	}
	return rep, nil
}

// purge removes key and its history from kv; false when it held nothing.
func purge(ctx context.Context, kv jetstream.KeyValue, key string) (bool, error) {
	if found, err := hasKey(ctx, kv, key); err != nil || !found {
		return false, err
	}
	return true, kv.Purge(ctx, key)
}

// noteGroupWins says in the log when a state file that had never swept
// (new, or deleted to start over) now holds the group's checkpoint:
// its watermark wins over WATCHER_START_FROM.
func (r *Replica) noteGroupWins(before state.Meta) {
	m, err := r.cfg.Store.Meta()
	if err != nil || !before.Watermark.IsZero() || m.Watermark.IsZero() {
		return
	}
	// Info, not a warning: in a fleet every shop a member takes over for the
	// first time does this (hundreds of lines at a member's death).
	r.log.Info("a new state file continues from the group's checkpoint, not from WATCHER_START_FROM: "+
		"to start the whole group over, stop every replica and run watcher reset",
		"key", r.Key(), "watermark", m.Watermark.Format(time.RFC3339), "baseline_done", m.BaselineDone)
}

// carryLimits copies the group's limits (waits, sessions, budget) from the
// first of from that has them to key, when key has none: a group that
// leaves an earlier version's key keeps honouring the shop's quota.
func carryLimits(ctx context.Context, kv jetstream.KeyValue, from []string, key string) error {
	if found, err := hasKey(ctx, kv, key+".limits"); err != nil || found {
		return err
	}
	for _, old := range from {
		e, err := kv.Get(ctx, old+".limits")
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue
		}
		if err != nil {
			return fmt.Errorf("limits %s.limits: %w", old, err)
		}
		if _, err := kv.Create(ctx, key+".limits", e.Value()); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("limits %s.limits: %w", key, err)
		}
		return nil
	}
	return nil
}

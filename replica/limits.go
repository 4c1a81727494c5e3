package replica

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/lease"
)

// The group's limits: what binds the shop's calls (the waits the service
// asked for, the sessions that may be open, the call budget) reaches the
// group when it changes, not with the next checkpoint (written only after
// a verified sweep with an empty outbox: a 429 or a spent daily quota
// blocks the sweep, and a long first sync writes none for minutes). The
// active writes the records named in Config.Limits, whenever one of them
// is saved (Records), to the key <Key>.limits of the checkpoint bucket, at
// most once a second; a replica that takes over with the group's state
// writes the newer of the checkpoint's and the key's into its state file
// before its first call.

// limitsValue is the value of the limits key.
type limitsValue struct {
	Writer  lease.Writer               `json:"writer"`
	Written time.Time                  `json:"written"`
	Records map[string]json.RawMessage `json:"records"`
}

// RecordStore is where a component keeps its records (*state.Store).
type RecordStore interface {
	SaveRecord(name string, v any) error
	LoadRecord(name string, v any) (found bool, err error)
}

// Records returns s with the replica told of every save of a record named
// in Config.Limits: pass it to the components that save them (the client's
// waits and sessions, the poller's budget).
func (r *Replica) Records(s RecordStore) RecordStore { return notifying{s, r} }

type notifying struct {
	RecordStore
	r *Replica
}

func (n notifying) SaveRecord(name string, v any) error {
	err := n.RecordStore.SaveRecord(name, v)
	if err == nil && slices.Contains(n.r.cfg.Limits, name) {
		select {
		case n.r.limits <- struct{}{}:
		default:
		}
	}
	return err
}

func (r *Replica) limitsKey() string { return r.Key() + ".limits" }

// startLimits writes the group's limits whenever they change, at most
// once a second, while this replica is active.
func (r *Replica) startLimits(ctx context.Context) (stop func()) {
	return background(ctx, func(ctx context.Context) {
		for {
			select {
			case <-ctx.Done():
				return
			case <-r.limits:
			}
			if err := r.writeLimits(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("writing the group's limits (waits, sessions, budget) failed; the next change writes them again", "err", err)
			}
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	})
}

// writeLimits writes the records of Config.Limits to the limits key (only
// while this replica holds the lease).
func (r *Replica) writeLimits(ctx context.Context) error {
	l := r.lease.Load()
	if len(r.cfg.Limits) == 0 || l == nil || r.ckv == nil {
		return nil
	}
	if err := l.Gate(); err != nil {
		return err
	}
	v := limitsValue{Writer: l.Writer(), Written: time.Now().UTC(), Records: map[string]json.RawMessage{}}
	for _, name := range r.cfg.Limits {
		var raw json.RawMessage
		found, err := r.cfg.Store.LoadRecord(name, &raw)
		if err != nil {
			return err
		}
		if found {
			v.Records[name] = raw
		}
	}
	b, _ := json.Marshal(v)
	if err := l.Gate(); err != nil {
		return err
	}
	if _, err := r.ckv.Put(ctx, r.limitsKey(), b); err != nil {
		return fmt.Errorf("group limits %s: %w", r.limitsKey(), err)
	}
	return nil
}

// applyLimits writes the group's limits into the state file after a
// takeover restored the group's checkpoint cp (found: there was one) into
// it: when the limits were written by the checkpoint's writer after it
// (that tenure's latest), or there was no checkpoint. Limits of another
// writer are older than the checkpoint (a takeover writes its first
// checkpoint before any call). It returns whether it applied any.
func (r *Replica) applyLimits(ctx context.Context, cp lease.Checkpoint, found bool) (bool, error) {
	if len(r.cfg.Limits) == 0 {
		return false, nil
	}
	e, err := r.ckv.Get(ctx, r.limitsKey())
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("group limits %s: %w", r.limitsKey(), err)
	}
	var v limitsValue
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		r.log.Warn("the group's limits do not decode: the checkpoint's are used", "key", r.limitsKey(), "err", err)
		return false, nil
	}
	if found && (v.Writer != cp.Writer() || v.Written.Before(cp.Written)) {
		return false, nil
	}
	for _, name := range r.cfg.Limits {
		raw, ok := v.Records[name]
		if !ok || !json.Valid(raw) {
			continue
		}
		if err := r.cfg.Store.SaveRecord(name, raw); err != nil {
			return false, err
		}
	}
	r.log.Info("the group's limits (waits, sessions, budget) as the last active left them, newer than its checkpoint: honoured before the first call",
		"writer", v.Writer.Instance, "written", v.Written.Format(time.RFC3339Nano))
	return true, nil
}

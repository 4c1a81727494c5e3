package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/replica"
)

// A watcher without the lease (WATCHER_LEASE=false) beside a group whose
// replicas hold it (same shop and stream) would call the shop and publish
// beside the active replica. It looks at the group's lease key before its
// first call and every unleasedEvery after: while another process holds
// it, this watcher makes no call (its gate is closed), is not ready, and
// says why once.

// unleasedEvery is how often a watcher without the lease looks at the
// group's lease key.
const unleasedEvery = 2 * time.Second

// groupHolder is who holds the lease of the shop's group: under its key,
// or under the key an earlier version used (Config.LegacyGroupKey), where
// a group that has not moved yet holds it. It returns the key it found
// the holder under.
func (w *Watcher) groupHolder(ctx context.Context) (v lease.Value, key string, found bool, err error) {
	for _, key = range []string{w.cfg.GroupKey(), w.cfg.LegacyGroupKey()} {
		if v, found, _, err = replica.Holder(ctx, w.nc, w.cfg.LeaseBucket, key); err != nil || found {
			return v, key, found, err
		}
	}
	return v, key, false, nil
}

// watchGroupLease looks at the group's lease key until ctx ends (a
// watcher without the lease, with JetStream); the first look before it
// returns.
func (w *Watcher) watchGroupLease(ctx context.Context) {
	look := func() {
		lctx, cancel := context.WithTimeout(ctx, unleasedEvery)
		defer cancel()
		v, key, found, err := w.groupHolder(lctx)
		if err != nil {
			return // NATS does not answer: the publisher's readiness says so
		}
		why := ""
		if found {
			why = fmt.Sprintf("the lease of this shop and stream is held by the replica %s (host %s) of a hot-standby group, and this watcher runs with %s_LEASE=false: no call to the shop while it holds it (two watchers would call the shop and publish); set %s_LEASE=true on every replica of the shop",
				v.Instance, v.Host, EnvPrefix, EnvPrefix)
		}
		if old := w.unleased.Swap(&why); old == nil && why != "" || old != nil && *old != why {
			if why != "" {
				w.log.Error("a hot-standby group runs beside this watcher without the lease: not calling the shop", "holder", v.Instance, "holder_host", v.Host, "key", key, "bucket", w.cfg.LeaseBucket+"_lease")
			} else if old != nil && *old != "" {
				w.log.Warn("nobody holds the group's lease any more: this watcher without the lease calls the shop again", "key", key)
			}
		}
	}
	look()
	go func() {
		t := time.NewTicker(unleasedEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				look()
			}
		}
	}()
}

// unleasedConflict is why a watcher without the lease does not call the
// shop ("" when it does).
func (w *Watcher) unleasedConflict() string {
	if p := w.unleased.Load(); p != nil {
		return *p
	}
	return ""
}

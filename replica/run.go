package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// role is what runs in this process: the pipeline's loops with the
// checkpoint loop and the rescan server (active), or the mirror (standby).
type role struct {
	stopWork   func(flush bool) int
	stopCkpt   func()
	stopLimits func() // the limits' follower
	stopRescan func()
	stopMirror func()
	// atStart: nothing ran since the process started or since a demotion
	// while nobody else held the lease: the state file may be the group's
	// newest (a single replica that lost NATS goes on as after a restart).
	atStart bool
}

// Run follows the lease until ctx ends: it runs the pipeline while this
// replica holds the lease and the mirror while it does not; then it stops
// what runs (the active flushes its outbox and writes a last checkpoint)
// and releases the lease. It returns when the shutdown began and the
// outbox entries left.
func (r *Replica) Run(ctx context.Context, p Pipeline) (stopAt time.Time, left int) {
	if !r.setup(ctx) {
		return time.Now(), r.cfg.Store.OutboxDepth()
	}
	l := r.lease.Load()
	// The limits' writer runs in every role: a standby writes what it
	// learned itself and could not write before (a restart, a demotion).
	stopWriter := r.startLimits(ctx)
	leaseCtx, cancelLease := context.WithCancel(context.WithoutCancel(ctx))
	leaseDone := make(chan struct{})
	go func() { defer close(leaseDone); _ = l.Run(leaseCtx) }()
	select {
	case <-l.Decided():
	case <-ctx.Done():
	}
	ro := role{atStart: true}
	tick := time.NewTicker(r.cfg.Tick)
	defer tick.Stop()
	for ctx.Err() == nil {
		switch {
		case l.Active() && ro.stopWork == nil:
			r.promote(ctx, p, &ro)
		case !l.Active():
			r.demote(ctx, &ro)
		}
		r.noteHolder(ctx)
		select {
		case <-ctx.Done():
		case <-r.changed:
		case <-tick.C:
		}
	}
	stopAt = time.Now()
	left = r.cfg.Store.OutboxDepth()
	if ro.stopWork != nil {
		ro.stopRescan()
		ro.stopCkpt()
		left = ro.stopWork(true)
		ro.stopLimits()
		stopWriter()
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := r.writeLimits(cctx); err != nil {
			r.log.Warn("the group's last limits were not written; the standby starts from the ones before", "err", err)
		}
		cancel()
		if left == 0 {
			cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if _, err := r.mirror.Committed(cctx, l); err != nil {
				r.checkpointFailed("the last checkpoint was not written; the standby starts from the one before", err)
			}
			cancel()
		}
		r.working.Store(false)
	}
	stopWriter()
	if ro.stopMirror != nil {
		ro.stopMirror()
	}
	cancelLease() // releases the lease: a standby takes over at once
	select {
	case <-leaseDone:
	case <-time.After(r.cfg.ReleaseWait):
	}
	return stopAt, left
}

// promote makes this replica, which now holds the lease, the active one:
// the mirror stops, the state file is brought to the group's state and the
// pipeline's loops start with the checkpoint loop and the rescan server.
func (r *Replica) promote(ctx context.Context, p Pipeline, ro *role) {
	if ro.stopMirror != nil {
		ro.stopMirror()
		ro.stopMirror = nil
	}
	if err := r.takeover(ctx, p, ro.atStart); err != nil {
		r.checkpointFailed("taking over failed; trying again", err)
		return
	}
	ro.atStart = false
	r.setFenced(false)
	ro.stopLimits = r.followLimits(ctx, p)
	ro.stopWork, ro.stopCkpt, ro.stopRescan = p.Start(ctx), r.startCheckpoints(ctx), r.serveRescan(p)
	r.working.Store(true)
}

// demote stops the pipeline's loops of a replica that lost the lease and
// runs the mirror once its state file is rewound to the group's checkpoint.
func (r *Replica) demote(ctx context.Context, ro *role) {
	r.tenured.Store(false)
	if ro.stopWork != nil {
		r.log.Warn("not the active replica any more: the sweep and publish loops stop")
		r.working.Store(false)
		ro.stopRescan()
		ro.stopCkpt()
		ro.stopWork(false)
		// A sweep the stop did not wait for commits nothing from now on
		// (one in progress ends first): what the outbox holds now is all
		// a demotion must undo.
		r.setFenced(true)
		ro.stopLimits()
		ro.stopWork = nil
		// Its outbox and watermark may be ahead of the group: kept while
		// nobody else holds the lease (NATS unreachable: a single replica
		// gets it back and goes on as after a restart), undone once
		// another replica holds it.
		ro.atStart = true
	}
	if ro.stopMirror != nil {
		return
	}
	if ro.atStart && !r.otherHolds(ctx) {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	before, _ := r.cfg.Store.Meta()
	err := r.mirror.Demoted(dctx)
	cancel()
	if err != nil {
		r.log.Warn("standby: rewinding to the group's checkpoint failed; trying again", "err", err)
		return
	}
	r.noteGroupWins(before)
	ro.atStart = false
	ro.stopMirror = r.startMirror(ctx)
}

// takeover prepares this replica, which now holds the lease, to work: the
// state file brought to the group's state with the group's limits merged
// in (mirror.Takeover, applyGroupLimits) and, when it was, the pipeline's
// workers built again from it.
func (r *Replica) takeover(ctx context.Context, p Pipeline, atStart bool) error {
	l := r.lease.Load()
	start := time.Now()
	if t := r.cfg.Takeovers; t != nil {
		select {
		case t <- struct{}{}:
			defer func() { <-t }()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	waited := time.Since(start)
	tctx, cancel := context.WithTimeout(ctx, r.cfg.TakeoverLimit)
	defer cancel()
	before, _ := r.cfg.Store.Meta()
	// An outbox left by this replica's last tenure (a commit that came
	// after its demotion undid the outbox, by an earlier version) is
	// undone first: its events were never the group's.
	if n := r.cfg.Store.OutboxDepth(); n > 0 && !atStart {
		r.log.Warn("taking over with an outbox of an earlier tenure: undone first", "events", n)
		atStart = true
	}
	restored, err := r.mirror.Takeover(tctx, l, atStart)
	if err != nil {
		return err
	}
	if restored {
		// The tenure's first checkpoint, before any call, tells a replica
		// that was active before that it does not continue: without it,
		// no call.
		if w := l.Writer(); r.ckpts.Last().Writer() != w {
			return fmt.Errorf("the tenure's first checkpoint was not written (%d outbox entries): not calling the shop", r.cfg.Store.OutboxDepth())
		}
	}
	r.noteGroupWins(before)
	if err := l.Gate(); err != nil {
		return err
	}
	if restored {
		if err := p.Restored(); err != nil {
			return err
		}
	}
	r.takeovers.Inc()
	m, _ := r.cfg.Store.Meta()
	r.log.Info("active replica: calling the shop", "instance", r.cfg.Instance, "restored_from_group", restored,
		"watermark", m.Watermark.Format(time.RFC3339), "mirrored_seq", r.mirror.Seq(), "took_ms", time.Since(start).Milliseconds(), "waited_ms", waited.Milliseconds())
	return nil
}

// startCheckpoints writes a checkpoint after each verified sweep, once the
// outbox is empty (within CheckpointWait; else the next sweep's turn).
// While no sweep ends for CheckpointEvery (a wait the service asked for,
// a long sweep), it looks whether the group's checkpoint is still there
// (one read, 1 s apart at least): gone (its bucket deleted or created
// again), the checkpoint and the group's limits are written again from
// this replica's state file at once, not at the next sweep's end, which
// may be hours away; a successor meanwhile started without the shop's
// session (a login more) and without the group's waits.
func (r *Replica) startCheckpoints(ctx context.Context) (stop func()) {
	return background(ctx, func(ctx context.Context) {
		var last checkpointed
		look := time.NewTicker(max(r.cfg.CheckpointEvery, time.Second))
		defer look.Stop()
		swept := r.now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-r.swept:
				swept = r.now()
			case <-look.C:
				if r.now().Sub(swept) < r.cfg.CheckpointEvery || !r.lookGone(ctx) {
					continue
				}
			}
			added, due := r.checkpointDue(last)
			if !due {
				continue
			}
			if r.waitQuiet(ctx) != nil {
				return
			}
			fresh := r.fresh.Swap(false) // saved from now on: the next one's
			ok, err := r.mirror.Committed(ctx, r.lease.Load())
			if err != nil && ctx.Err() == nil {
				r.checkpointFailed("writing the checkpoint failed", err)
			}
			if ok && err == nil {
				last = checkpointed{at: r.now(), added: added, written: true}
			} else if fresh {
				r.fresh.Store(true)
			}
		}
	})
}

// lookGone is the checkpoint loop's look: it says whether the group's
// checkpoint is gone (to be written again from the state file at once,
// with the group's limits). The group's limits are read first (one read
// while they are there, as after every write of an active): gone while
// the checkpoint is there (the bucket created again with a checkpoint
// only, a restore, the key deleted), they are written again alone (the
// checkpoint that is there is the next sweep's to replace); without,
// a successor in the wait took over with the checkpoint's records, the
// wait missing.
func (r *Replica) lookGone(ctx context.Context) bool {
	limits := len(r.cfg.Limits) > 0
	if limits && !r.keyGone(ctx, r.limitsKey()) {
		return false
	}
	if r.keyGone(ctx, r.Key()) {
		r.log.Warn("the group's checkpoint is gone (its bucket deleted or created again): written again from this replica's state file, with the group's limits")
		r.fresh.Store(true)
		r.pokeLimits()
		return true
	}
	if limits {
		r.log.Warn("the group's limits are gone (their key deleted, or the bucket created again without them): written again from this replica's state file")
		r.pokeLimits()
	}
	return false
}

// keyGone says whether key is missing from the checkpoint bucket (an
// error reading it: not known to be).
func (r *Replica) keyGone(ctx context.Context, key string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := r.ckv.Get(ctx, key)
	return errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted)
}

// checkpointed is the checkpoint loop's last checkpoint: when, and the
// outbox's sequence read before it (Store.OutboxAdded).
type checkpointed struct {
	at      time.Time
	added   uint64
	written bool
}

// checkpointDue says whether a verified sweep is followed by a
// checkpoint: when events were added to the outbox since the last one,
// when the group may lack what only a checkpoint hands on (fresh: the
// client's sealed session saved after a new login, else a successor from
// the checkpoint before logs in again, a session more towards the shop's
// limit; the checkpoint bucket created again, its checkpoint gone),
// while a record of the group's limits is not in the group's (unsent: its
// write failed; a wait the service announced, else lost with this
// process), when the last one is CheckpointEvery old, or when none was
// written yet by this loop. A sweep that added no event only moved the watermark (and
// the records: the read ledger, the budget); a successor from the
// checkpoint before re-reads at most CheckpointEvery more of the
// timeline, within the overlap it re-reads anyway, and nothing of the
// stream is after it. Skipped, each was a state-file write and two NATS
// requests per sweep and shop (a fifth of a fleet's state-file writes at
// rest, docs/fleet.md). added is the outbox's sequence now.
func (r *Replica) checkpointDue(last checkpointed) (added uint64, due bool) {
	added, err := r.cfg.Store.OutboxAdded()
	if err != nil || !last.written || r.fresh.Load() || r.anyUnsent() {
		return added, true
	}
	return added, added != last.added || r.now().Sub(last.at) >= r.cfg.CheckpointEvery
}

// anyUnsent says whether records saved through Records are not yet in
// the group's limits (waiting for a write under way, or after one that
// failed).
func (r *Replica) anyUnsent() bool {
	r.limMu.Lock()
	defer r.limMu.Unlock()
	return len(r.unsent) > 0
}

// Checkpoint writes a checkpoint now, once the outbox is empty (within
// CheckpointWait): the first sync's baseline reaches the group before the
// sync reads (poller.Config.OnBaseline), so that a successor syncs with it.
func (r *Replica) Checkpoint(ctx context.Context) error {
	if err := r.waitQuiet(ctx); err != nil {
		return err
	}
	ok, err := r.mirror.Committed(ctx, r.lease.Load())
	if err == nil && !ok {
		err = fmt.Errorf("checkpoint: the outbox holds %d events", r.cfg.Store.OutboxDepth())
	}
	return err
}

// waitQuiet waits until the outbox is empty, CheckpointWait at most; an
// error only when ctx ended.
func (r *Replica) waitQuiet(ctx context.Context) error {
	for end := time.Now().Add(r.cfg.CheckpointWait); r.cfg.Store.OutboxDepth() > 0 && time.Now().Before(end) && ctx.Err() == nil; {
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	return ctx.Err()
}

// startMirror runs the mirror until stop.
func (r *Replica) startMirror(ctx context.Context) (stop func()) {
	r.mirrorAlive.Store(true)
	stop = background(ctx, func(ctx context.Context) {
		defer r.mirrorAlive.Store(false)
		_ = r.mirror.Run(ctx)
	})
	r.log.Info("standby: mirroring the stream; no call to the shop", "from_seq", r.mirror.Seq())
	return stop
}

// background runs f in a goroutine until stop, which ends its context and
// waits for it to return.
func background(ctx context.Context, f func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(ctx)
	}()
	return func() { cancel(); <-done }
}

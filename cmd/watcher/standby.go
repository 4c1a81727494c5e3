package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/mirror"
	"github.com/orderwatch/orderwatch/publisher"
)

// replica is the hot-standby wiring of the daemon (WATCHER_LEASE with a
// stream): the lease says whether this process is the active replica; the
// active runs the sweep and publish loops and writes checkpoints, a standby
// runs the mirror. nil when the feature is off.
type replica struct {
	key      string
	instance string
	host     string

	lease  atomic.Pointer[lease.Lease]   // nil until NATS answered
	mirror *mirror.Mirror                // set once by setup, before the lease
	shown  atomic.Pointer[mirror.Mirror] // the same, for the HTTP handlers and metrics
	ckpts  *lease.Checkpoints

	changed     chan struct{} // the lease changed hands (cap 1)
	swept       chan struct{} // a verified sweep committed (cap 1)
	working     atomic.Bool   // the sweep and publish loops run (active tenure)
	mirrorAlive atomic.Bool
	holder      atomic.Value // lease.Value: the holder last seen ("" instance: none)
	setupErr    atomic.Value // string: why the buckets cannot be reached yet ("" when bound)

	takeovers  prometheus.Counter
	applied    prometheus.Counter
	rescans    prometheus.Counter
	rescanFrom atomic.Pointer[time.Time] // a rescan request waiting for the end of a sweep (rescan.go)
}

func newReplica(d *daemon) (*replica, error) {
	host, _ := os.Hostname()
	id := d.cfg.InstanceID
	if id == "" {
		id = host
	}
	r := &replica{
		key: lease.Key(d.cfg.PlentyURL, d.cfg.Stream), instance: id, host: host,
		changed: make(chan struct{}, 1), swept: make(chan struct{}, 1),
	}
	r.holder.Store(lease.Value{})
	r.register(d.reg)
	return r, nil
}

// register creates and registers the hot standby's metrics.
func (r *replica) register(reg prometheus.Registerer) {
	r.takeovers = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderwatch_takeovers_total", Help: "Times this replica became the active one of its group (the lease acquired).",
	})
	r.applied = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderwatch_standby_applied_events_total", Help: "Events of the stream a standby applied to its snapshot.",
	})
	r.rescans = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderwatch_rescan_requests_total", Help: "Rescan requests applied (watcher rescan): the watermark rewound to the requested time.",
	})
	reg.MustRegister(r.takeovers, r.applied, r.rescans,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orderwatch_leader", Help: "1 while this replica holds the lease (the active one), 0 as a standby.",
		}, func() float64 {
			if r.active() {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orderwatch_standby_lag_events", Help: "Events of the group in the stream a standby has not applied yet (0 on the active; -1 unknown).",
		}, func() float64 {
			if m := r.shown.Load(); m != nil && !r.active() {
				return float64(m.Lag())
			}
			return 0
		}),
	)
}

func (r *replica) active() bool {
	l := r.lease.Load()
	return l != nil && l.Active()
}

// gate is the client's and the publisher's Gate: with the lease feature,
// nothing goes to the shop or the stream unless this process holds the
// lease before its deadline.
func (d *daemon) gate() error {
	if d.rep == nil {
		return nil
	}
	l := d.rep.lease.Load()
	if l == nil {
		return lease.ErrNotActive
	}
	return l.Gate()
}

// setup creates (or binds) the buckets and the lease, retrying until NATS
// answers or ctx ends.
func (r *replica) setup(ctx context.Context, d *daemon) bool {
	js, err := jetstream.New(d.nc, jetstream.WithDefaultTimeout(5*time.Second))
	if err != nil {
		d.log.Error("hot standby: JetStream", "err", err)
		return false
	}
	for warned := false; ctx.Err() == nil; warned = true {
		err := r.bind(ctx, d, js)
		if err == nil {
			r.setupErr.Store("")
			return true
		}
		r.setupErr.Store(err.Error())
		if !warned {
			d.log.Warn("hot standby: the lease buckets cannot be reached yet; no call to the shop until this replica holds the lease", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return false
}

func (r *replica) bind(ctx context.Context, d *daemon, js jetstream.JetStream) error {
	name := d.cfg.LeaseBucket
	kv, ttl, err := lease.Bucket(ctx, js, name+"_lease", d.cfg.LeaseTTL)
	if err != nil {
		return err
	}
	ckv, err := lease.CheckpointBucket(ctx, js, name+"_checkpoint")
	if err != nil {
		return err
	}
	dumps, err := mirror.DumpBucket(ctx, js, name+"_snapshot")
	if err != nil {
		return err
	}
	if err := d.pub.EnsureStream(ctx); err != nil {
		return err
	}
	r.ckpts = lease.NewCheckpoints(ckv, r.key)
	r.mirror, err = mirror.New(mirror.Config{
		JS: js, Stream: d.cfg.Stream, SubjectPrefix: d.cfg.SubjectPrefix, Store: d.store,
		Checkpoints: r.ckpts, Dumps: dumps, Key: r.key, Logger: d.log, Own: []string{publisher.PublisherRecord},
		OnApplied: func(n int) { r.applied.Add(float64(n)) },
	})
	if err != nil {
		return err
	}
	l := lease.New(kv, ttl, lease.Config{
		Key: r.key, Instance: r.instance, Host: r.host, File: r.mirror.File(), Logger: d.log,
		OnChange: func(bool) {
			select {
			case r.changed <- struct{}{}:
			default:
			}
		},
	})
	r.shown.Store(r.mirror)
	r.lease.Store(l)
	d.log.Info("hot standby: lease", "key", r.key, "instance", r.instance, "ttl", ttl.String(), "bucket", name+"_lease")
	return nil
}

// runReplica is run's middle for a member of a hot-standby group: it
// follows the lease until ctx ends, then stops what runs (the active
// flushes its outbox and writes a last checkpoint) and releases the lease.
// It returns when the shutdown began and the outbox entries left.
func (d *daemon) runReplica(ctx context.Context) (time.Time, int) {
	r := d.rep
	if !r.setup(ctx, d) {
		return time.Now(), d.store.OutboxDepth()
	}
	l := r.lease.Load()
	leaseCtx, cancelLease := context.WithCancel(context.WithoutCancel(ctx))
	leaseDone := make(chan struct{})
	go func() { defer close(leaseDone); _ = l.Run(leaseCtx) }()
	select {
	case <-l.Decided():
	case <-ctx.Done():
	}
	var (
		stopWork   func(flush bool) int
		stopCkpt   func()
		stopRescan func() // rescan.go
		stopMirror func()
		atStart    = true
	)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for ctx.Err() == nil {
		switch {
		case l.Active() && stopWork == nil:
			if stopMirror != nil {
				stopMirror()
				stopMirror = nil
			}
			if err := d.takeover(ctx, atStart); err != nil {
				d.log.Warn("taking over failed; trying again", "err", err)
				break
			}
			atStart = false
			stopWork, stopCkpt, stopRescan = d.startWorkers(ctx), d.startCheckpoints(ctx), d.serveRescan()
			r.working.Store(true)
		case !l.Active():
			if stopWork != nil {
				d.log.Warn("not the active replica any more: the sweep and publish loops stop")
				r.working.Store(false)
				stopRescan()
				stopCkpt()
				stopWork(false)
				stopWork = nil
				// Its outbox and watermark may be ahead of the group: kept
				// while nobody else holds the lease (NATS unreachable: a
				// single replica gets it back and goes on as after a
				// restart), undone once another replica holds it.
				atStart = true
			}
			if stopMirror == nil {
				if atStart && !r.otherHolds(ctx) {
					break
				}
				dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				err := r.mirror.Demoted(dctx)
				cancel()
				if err != nil {
					d.log.Warn("standby: rewinding to the group's checkpoint failed; trying again", "err", err)
					break
				}
				atStart = false
				stopMirror = d.startMirror(ctx)
			}
		}
		r.noteHolder(ctx)
		select {
		case <-ctx.Done():
		case <-r.changed:
		case <-tick.C:
		}
	}
	start := time.Now()
	left := d.store.OutboxDepth()
	if stopWork != nil {
		stopRescan()
		stopCkpt()
		left = stopWork(true)
		if left == 0 {
			cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if _, err := r.mirror.Committed(cctx, l); err != nil {
				d.log.Warn("the last checkpoint was not written; the standby starts from the one before", "err", err)
			}
			cancel()
		}
		r.working.Store(false)
	}
	if stopMirror != nil {
		stopMirror()
	}
	cancelLease() // releases the lease: a standby takes over at once
	select {
	case <-leaseDone:
	case <-time.After(3 * time.Second):
	}
	return start, left
}

// takeover prepares this replica, which now holds the lease, to work: the
// state file brought to the group's state (mirror.Takeover) and, when it
// was, the client and poller built again from it.
func (d *daemon) takeover(ctx context.Context, atStart bool) error {
	r := d.rep
	l := r.lease.Load()
	start := time.Now()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	restored, err := r.mirror.Takeover(tctx, l, atStart)
	if err != nil {
		return err
	}
	if err := l.Gate(); err != nil {
		return err
	}
	if restored {
		if err := d.newWorkers(); err != nil {
			return err
		}
		d.lastOK.Store(0)
	}
	r.takeovers.Inc()
	m, _ := d.store.Meta()
	d.log.Info("active replica: calling the shop", "instance", r.instance, "restored_from_group", restored,
		"watermark", m.Watermark.Format(time.RFC3339), "mirrored_seq", r.mirror.Seq(), "took_ms", time.Since(start).Milliseconds())
	return nil
}

// startCheckpoints writes a checkpoint after each verified sweep, once the
// outbox is empty (within a few seconds; else the next sweep's turn).
func (d *daemon) startCheckpoints(ctx context.Context) (stop func()) {
	r := d.rep
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-r.swept:
			}
			for end := time.Now().Add(5 * time.Second); d.store.OutboxDepth() > 0 && time.Now().Before(end) && ctx.Err() == nil; {
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
			if ctx.Err() != nil {
				return
			}
			if _, err := r.mirror.Committed(ctx, r.lease.Load()); err != nil && ctx.Err() == nil {
				d.log.Warn("writing the checkpoint failed", "err", err)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// onCommitted is called after each verified sweep.
func (r *replica) onCommitted() {
	select {
	case r.swept <- struct{}{}:
	default:
	}
}

// startMirror runs the mirror until stop.
func (d *daemon) startMirror(ctx context.Context) (stop func()) {
	r := d.rep
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	r.mirrorAlive.Store(true)
	go func() {
		defer close(done)
		defer r.mirrorAlive.Store(false)
		_ = r.mirror.Run(ctx)
	}()
	d.log.Info("standby: mirroring the stream; no call to the shop", "from_seq", r.mirror.Seq())
	return func() { cancel(); <-done }
}

// otherHolds says whether another process holds the lease now (false when
// nobody does or NATS does not answer).
func (r *replica) otherHolds(ctx context.Context) bool {
	l := r.lease.Load()
	hctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	v, found, err := l.Holder(hctx)
	return err == nil && found && !l.Mine(v)
}

// noteHolder reads who holds the lease (for the state report).
func (r *replica) noteHolder(ctx context.Context) {
	l := r.lease.Load()
	if l == nil {
		return
	}
	hctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if v, found, err := l.Holder(hctx); err == nil {
		if !found {
			v = lease.Value{}
		}
		r.holder.Store(v)
	}
}

// standbyReady is the readiness of a replica that does not hold the lease:
// caught up with the stream (so that a rollout of two replicas proceeds),
// the state file writable and NATS connected.
func (d *daemon) standbyReady() (bool, string) {
	r := d.rep
	if e, _ := r.setupErr.Load().(string); e != "" {
		return false, "hot standby: the lease buckets cannot be used, so this replica makes no call to the shop (WATCHER_LEASE=false runs without the lease): " + e
	}
	switch {
	case d.store.WriteErr() != nil:
		return false, d.store.WriteErr().Error()
	case !d.pub.Connected():
		return false, "NATS not connected"
	case r.shown.Load() == nil || !r.mirrorAlive.Load():
		return false, "standby: not mirroring the stream yet"
	case !r.shown.Load().CaughtUp(10 * time.Second):
		return false, fmt.Sprintf("standby: behind the stream by %d events", r.shown.Load().Lag())
	}
	h, _ := r.holder.Load().(lease.Value)
	if h.Instance == "" {
		return true, "standby: caught up with the stream; no replica holds the lease right now"
	}
	return true, fmt.Sprintf("standby: caught up with the stream; active replica %s", h.Instance)
}

// leaseReport is the lease in the state report.
type leaseReport struct {
	Key       string    `json:"key"`
	Instance  string    `json:"instance"`         // this replica
	Role      string    `json:"role"`             // active, standby or starting
	Holder    string    `json:"holder,omitempty"` // the instance holding the lease
	HolderAt  string    `json:"holderHost,omitempty"`
	Since     time.Time `json:"since,omitzero"`    // since when the holder holds it
	Deadline  time.Time `json:"deadline,omitzero"` // this replica's own (active)
	LagEvents int64     `json:"standbyLagEvents"`
	Seq       uint64    `json:"mirroredSeq"`
}

func (d *daemon) leaseReport() *leaseReport {
	r := d.rep
	if r == nil {
		return nil
	}
	rep := &leaseReport{Key: r.key, Instance: r.instance, Role: "starting"}
	l := r.lease.Load()
	if l == nil {
		return rep
	}
	rep.Role = "standby"
	if l.Active() {
		rep.Role, rep.Deadline = "active", l.Deadline()
	}
	h, _ := r.holder.Load().(lease.Value)
	rep.Holder, rep.HolderAt, rep.Since = h.Instance, h.Host, h.Since
	if m := r.shown.Load(); m != nil {
		rep.LagEvents, rep.Seq = m.Lag(), m.Seq()
		if rep.Role == "active" {
			rep.LagEvents = 0
		}
	}
	return rep
}

// userAgent names the replica to the shop (its access log tells the
// replicas apart).
func (d *daemon) userAgent() string {
	if d.rep == nil {
		return "orderwatch/" + version
	}
	return "orderwatch/" + version + " (" + d.rep.instance + ")"
}

// checkLease is `watcher check`'s line about the hot-standby group: who
// holds the lease of this shop and stream. Informational: no replica
// holding it is a warning (none running, or a takeover under way).
func checkLease(ctx context.Context, cfg *Config, nc *nats.Conn, w io.Writer) {
	js, err := jetstream.New(nc)
	if err != nil {
		fmt.Fprintf(w, "WARN lease: %v\n", err)
		return
	}
	key := lease.Key(cfg.PlentyURL, cfg.Stream)
	kv, err := js.KeyValue(ctx, cfg.LeaseBucket+"_lease")
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		fmt.Fprintf(w, "ok   lease: no replica has run yet (bucket %s_lease is created at the first start)\n", cfg.LeaseBucket)
		return
	}
	if err != nil {
		fmt.Fprintf(w, "WARN lease: %v\n", err)
		return
	}
	v, found, err := lease.New(kv, time.Second, lease.Config{Key: key}).Holder(ctx)
	switch {
	case err != nil:
		fmt.Fprintf(w, "WARN lease: %v\n", err)
	case !found:
		fmt.Fprintf(w, "WARN lease %s: no replica holds it (none running, or a takeover under way)\n", key)
	default:
		fmt.Fprintf(w, "ok   lease %s: held by %s (host %s) since %s\n", key, v.Instance, v.Host, v.Since.Format(time.RFC3339))
	}
}

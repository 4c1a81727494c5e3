// Package replica is the hot standby of one shop's pipeline (one active
// replica per shop and stream): over a lease (package lease) it says which
// process of the group is the active one; the active runs the pipeline's
// sweep and publish loops, writes a checkpoint after each verified sweep
// and serves the group's rescan requests; a standby mirrors the stream
// into its state file (package mirror) and takes over when the lease is
// free. It knows the pipeline only through Pipeline.
package replica

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/mirror"
	"github.com/orderwatch/orderwatch/state"
)

// Pipeline is what the replica needs of the pipeline it runs.
type Pipeline interface {
	// Start runs the sweep and publish loops until ctx ends or stop is
	// called. stop ends them and, with flush, publishes what is left in
	// the outbox (bounded); it returns the outbox entries left.
	Start(ctx context.Context) (stop func(flush bool) int)
	// Restored rebuilds what reads the state file (the client, the poller,
	// the timings) after a takeover restored the group's state into it.
	Restored() error
	// Rescan asks the sweep to read the period from `from` again between
	// two sweeps; applied is called once the watermark is rewound.
	Rescan(from time.Time, applied func())
}

// Store is what the replica needs of the state file (*state.Store).
type Store interface {
	mirror.Store
	OutboxDepth() int
	OutboxAdded() (uint64, error)
	Meta() (state.Meta, error)
}

var _ Store = (*state.Store)(nil)

// Config configures a Replica.
type Config struct {
	NC    *nats.Conn
	Store Store
	// EnsureStream binds (or creates) the group's stream before the mirror
	// reads it (the publisher's).
	EnsureStream  func(ctx context.Context) error
	Stream        string
	SubjectPrefix string
	// FileLock names the state file whose lock this process holds
	// (state.Store.LockID): the lease of an earlier process on the same
	// file is taken over at once, never one of a copy (lease.Config.Lock).
	FileLock string
	// Key is the group's key (lease.Key of the shop id and the stream);
	// LegacyKey the key an earlier version used (lease.Key of the service
	// URL and the stream), kept while the group's state is under it
	// (GroupKey). Instance and Host name this replica in the lease.
	Key, LegacyKey, Instance, Host string
	// Shop is the shop's id (package shopid): the mirror applies only
	// events published with it (or, without the header, with Source as
	// their CloudEvents source). ShopURL is the service URL, named in the
	// lease's value: a replica of another shop under the same key refuses
	// to join (ShopConflictError).
	Shop, ShopURL, Source string
	// Bucket is the name prefix of the buckets <Bucket>_lease,
	// <Bucket>_checkpoint and <Bucket>_snapshot.
	Bucket string
	// TTL is the lease's time to live for a bucket this replica creates.
	TTL time.Duration
	// Replicas of the buckets (lease, checkpoint, snapshot): 0 follows the
	// stream's, so that on a NATS cluster no single node holds the group's
	// lease while the stream survives its loss.
	Replicas int
	// Own names the records of this replica's own file a checkpoint never
	// replaces (mirror.Config.Own).
	Own []string
	// Limits names the records that bind the shop's calls (the waits, the
	// sessions, the budget): written to the group when one is saved
	// through Records, merged with the group's by Merges (limits.go; a
	// record without one: the group's replaces this replica's at a
	// takeover only when it is the later state).
	Limits []string
	Merges map[string]Limit
	// Now is the wall clock [time.Now].
	Now func() time.Time
	// Buckets, when set, are the group's buckets bound once by the
	// process for all its replicas (a fleet, BindBuckets): this replica
	// binds none itself (Bucket, TTL and Replicas are not used; the
	// stream is still ensured first, EnsureStream: created again when
	// gone) and does not watch its lease key with a consumer of its own
	// (the process watches the bucket and calls WakeLease when the key is
	// deleted or expires).
	Buckets *Buckets
	// Takeovers, when set, is shared by the replicas of a process: at most
	// cap(Takeovers) of them restore the group's state at once (a fleet
	// member taking over hundreds of shops after another died would
	// otherwise ask NATS for every shop's checkpoint, dump and stream at
	// the same moment: every request slows down, the leases' renewals
	// too). A replica waiting for its turn holds the lease and calls
	// nothing.
	Takeovers chan struct{}
	// LimitsFeed, when set, is the process's one watch of the groups'
	// limits keys in the checkpoint bucket of Buckets (NewLimitsFeed,
	// run by the process): the active replica follows its group's limits
	// through it instead of a watch of its own (a consumer per active
	// shop on the bucket's stream).
	LimitsFeed *LimitsFeed

	Logger     *slog.Logger
	Registerer prometheus.Registerer // the hot standby's metrics; nil: none
	Tuning
}

// Tuning holds the replica's delays; zero values take the defaults in
// brackets (tests make them short).
type Tuning struct {
	Tick           time.Duration // the role loop looks at the lease at least this often [1s]
	Retry          time.Duration // between attempts to bind the buckets [1s]
	CheckpointWait time.Duration // a checkpoint waits this long at most for an empty outbox [5s]
	// CheckpointEvery: a sweep that added no event is followed by a
	// checkpoint only when the last one is this old [10s], unless a record
	// only a checkpoint hands on changed (see checkpointDue).
	CheckpointEvery time.Duration
	Renew           time.Duration // between renewals of the lease [TTL/3]
	Margin          time.Duration // taken off the TTL for the local deadline [TTL/5]
	TakeoverLimit   time.Duration // bounds one takeover [30s]
	ReleaseWait     time.Duration // a stop waits this long at most for the release [3s]
}

func (t *Tuning) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.Tick, time.Second)
	def(&t.Retry, time.Second)
	def(&t.CheckpointWait, 5*time.Second)
	def(&t.CheckpointEvery, 10*time.Second)
	def(&t.TakeoverLimit, 30*time.Second)
	def(&t.ReleaseWait, 3*time.Second)
}

// Replica is one process's membership of its hot-standby group.
type Replica struct {
	cfg Config
	log *slog.Logger

	lease  atomic.Pointer[lease.Lease]   // nil until NATS answered
	mirror *mirror.Mirror                // set once by setup, before the lease
	shown  atomic.Pointer[mirror.Mirror] // the same, for the readiness and the metrics
	key    atomic.Pointer[string]        // the group's key in force (GroupKey), set by setup
	// urlBefore is the shop's URL the group recorded when it differs from
	// this replica's (the same shop id under a new URL), set by setup.
	urlBefore atomic.Pointer[string]
	ckpts     *lease.Checkpoints
	ckv       jetstream.KeyValue // the checkpoint bucket (the limits key too)
	limits    chan struct{}      // the group's limits are to be written again (cap 1)
	// limMu keeps the writes of the group's limits apart; limitsQuiet
	// (unix nanos) is until when a save does not write through (a write
	// just failed).
	limMu       sync.Mutex
	unsent      map[string]json.RawMessage // under limMu: records saved through Records and not yet in the group's limits (UnsentRecord)
	absorbers   sync.Map                   // record name → the Absorber last saved through Records
	limitsQuiet atomic.Int64
	// tenured: the takeover merged the group's limits into the state file
	// (applyGroupLimits) and no demotion came since: its records are the
	// active's to write (writeLimits).
	tenured atomic.Bool
	// fresh: the group may lack what only a checkpoint hands on: a record
	// was saved through Records outside Config.Limits (the client's sealed
	// session), or a write of the group's limits found their key missing
	// (the checkpoint bucket created again, its checkpoint gone). The next
	// verified sweep's checkpoint is due (checkpointDue).
	fresh atomic.Bool
	// clockRead says that the takeover in progress read the server's
	// clock (prefetchClock), taken by applyGroupLimits.
	clockRead atomic.Bool

	changed     chan struct{} // the lease changed hands (cap 1)
	swept       chan struct{} // a verified sweep committed (cap 1)
	working     atomic.Bool   // the sweep and publish loops run (active tenure)
	mirrorAlive atomic.Bool
	holder      atomic.Value // lease.Value: the holder last seen ("" instance: none)
	setupErr    atomic.Value // string: why the buckets cannot be reached yet ("" when bound)

	// fence keeps the pipeline's commits (Fence) and a demotion apart:
	// fenced unless a tenure's loops run.
	fence  sync.RWMutex
	fenced bool

	takeovers prometheus.Counter
	applied   prometheus.Counter
	rescans   prometheus.Counter
}

// New returns the replica and registers its metrics; it makes no call to
// NATS (Run does).
func New(cfg Config) *Replica {
	cfg.Tuning.defaults()
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Replica{cfg: cfg, log: cfg.Logger, changed: make(chan struct{}, 1), swept: make(chan struct{}, 1), limits: make(chan struct{}, 1)}
	r.fenced = true
	r.holder.Store(lease.Value{})
	r.setupErr.Store("")
	r.register(cfg.Registerer)
	r.loadUnsent()
	return r
}

func (r *Replica) now() time.Time { return r.cfg.Now() }

// Instance is this replica's name in the lease.
func (r *Replica) Instance() string { return r.cfg.Instance }

// register creates and registers the hot standby's metrics.
func (r *Replica) register(reg prometheus.Registerer) {
	r.takeovers = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderwatch_takeovers_total", Help: "Times this replica became the active one of its group (the lease acquired).",
	})
	r.applied = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderwatch_standby_applied_events_total", Help: "Events of the stream a standby applied to its snapshot.",
	})
	r.rescans = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderwatch_rescan_requests_total", Help: "Rescan requests applied (watcher rescan): the watermark rewound to the requested time.",
	})
	if reg == nil {
		return
	}
	reg.MustRegister(r.takeovers, r.applied, r.rescans,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orderwatch_leader", Help: "1 while this replica holds the lease and works as the active one (its takeover done, its loops running), 0 otherwise.",
		}, func() float64 {
			if r.Active() && r.Working() {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orderwatch_standby_lag_events", Help: "Events of the group in the stream a standby has not applied yet (0 on the active; -1 unknown).",
		}, func() float64 {
			if m := r.shown.Load(); m != nil && !r.Active() {
				return float64(m.Lag())
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orderwatch_standby_unproven", Help: "1 while this replica's snapshot cannot be proven to hold every event of the group (the stream was created again or lost events before it read them; see the state report), until the active's next snapshot dump.",
		}, func() float64 {
			if m := r.shown.Load(); m != nil && m.Unproven() != "" {
				return 1
			}
			return 0
		}),
	)
}

// Active says whether this replica holds the lease now.
func (r *Replica) Active() bool {
	l := r.lease.Load()
	return l != nil && l.Active()
}

// Working says whether the pipeline's loops run (an active tenure).
func (r *Replica) Working() bool { return r.working.Load() }

// Gate is the client's and the publisher's Gate: nothing goes to the shop
// or the stream unless this process holds the lease before its deadline.
func (r *Replica) Gate() error {
	l := r.lease.Load()
	if l == nil {
		return lease.ErrNotActive
	}
	return l.Gate()
}

// ErrFenced is returned by Fence once this replica stopped being the
// active one (or before it became it).
var ErrFenced = errors.New("not the active replica: the commit to the state file is refused (a demotion undoes what the tenure left unpublished)")

// Fence runs commit, the pipeline's commit to the state file, unless this
// replica's tenure ended: a sweep still running when a demotion stopped
// waiting for it (the shutdown timeout) cannot commit after the demotion
// undid the tenure's outbox. A demotion waits for a commit in progress.
func (r *Replica) Fence(commit func() error) error {
	r.fence.RLock()
	defer r.fence.RUnlock()
	if r.fenced {
		return ErrFenced
	}
	return commit()
}

// setFenced opens or closes the fence (closing it waits for a commit in
// progress).
func (r *Replica) setFenced(fenced bool) {
	r.fence.Lock()
	r.fenced = fenced
	r.fence.Unlock()
}

// Swept tells the replica that a verified sweep committed (the active
// writes a checkpoint after it).
func (r *Replica) Swept() {
	select {
	case r.swept <- struct{}{}:
	default:
	}
}

// Status is what the readiness of a standby depends on.
type Status struct {
	Working   bool   // the pipeline's loops run: the pipeline's own readiness applies
	SetupErr  string // why the buckets cannot be used ("" when bound)
	Mirroring bool   // the mirror runs
	CaughtUp  bool   // the mirror applied the stream up to 10 s ago
	Lag       int64  // events not applied yet
	Holder    string // the instance holding the lease ("" none)
	// Unproven says why the snapshot may miss events of the group
	// (mirror.Unproven): reported, not a reason to be unready (a rollout
	// must proceed; the active's next dump proves it again).
	Unproven string
}

// Status reads the replica's status now.
func (r *Replica) Status() Status {
	s := Status{Working: r.working.Load()}
	s.SetupErr, _ = r.setupErr.Load().(string)
	if m := r.shown.Load(); m != nil {
		s.Mirroring = r.mirrorAlive.Load()
		s.CaughtUp, s.Lag, s.Unproven = m.CaughtUp(10*time.Second), m.Lag(), m.Unproven()
	}
	h, _ := r.holder.Load().(lease.Value)
	s.Holder = h.Instance
	return s
}

// Report is the lease in the state report.
type Report struct {
	Key       string    `json:"key"`
	Instance  string    `json:"instance"`         // this replica
	Role      string    `json:"role"`             // active, standby or starting
	Holder    string    `json:"holder,omitempty"` // the instance holding the lease
	HolderAt  string    `json:"holderHost,omitempty"`
	Since     time.Time `json:"since,omitzero"`    // since when the holder holds it
	Deadline  time.Time `json:"deadline,omitzero"` // this replica's own (active)
	LagEvents int64     `json:"standbyLagEvents"`
	Seq       uint64    `json:"mirroredSeq"`
	// Unproven says why this replica's snapshot may miss events of the
	// group (mirror.Unproven); "" when it holds every one.
	Unproven string `json:"unproven,omitempty"`
	// ShopURLBefore is the service URL the group recorded before this
	// replica joined it under another URL of the same shop id (a URL
	// change with WATCHER_SHOP_ID set); "" when the same.
	ShopURLBefore string `json:"shopUrlBefore,omitempty"`
}

// Report is the replica's part of the state report.
func (r *Replica) Report() *Report {
	rep := &Report{Key: r.Key(), Instance: r.cfg.Instance, Role: "starting"}
	if u := r.urlBefore.Load(); u != nil {
		rep.ShopURLBefore = *u
	}
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
		rep.LagEvents, rep.Seq, rep.Unproven = m.Lag(), m.Seq(), m.Unproven()
		if rep.Role == "active" {
			rep.LagEvents = 0
		}
	}
	return rep
}

// setup creates (or binds) the buckets and the lease, retrying until NATS
// answers or ctx ends.
func (r *Replica) setup(ctx context.Context) bool {
	js, err := jetstream.New(r.cfg.NC, jetstream.WithDefaultTimeout(5*time.Second))
	if err != nil {
		r.log.Error("hot standby: JetStream", "err", err)
		return false
	}
	for warned := false; ctx.Err() == nil; warned = true {
		err := r.bind(ctx, js)
		if err == nil {
			r.setupErr.Store("")
			return true
		}
		r.setupErr.Store(err.Error())
		switch {
		case warned, ctx.Err() != nil: // stopped while binding (a fleet's lost race)
		case errors.Is(err, ErrShopConflict):
			r.log.Error("hot standby: refusing to join the group of another shop; no call to the shop", "err", err)
		default:
			r.log.Warn("hot standby: the lease buckets cannot be reached yet; no call to the shop until this replica holds the lease", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(r.cfg.Retry):
		}
	}
	return false
}

// Buckets are a group's buckets, bound (BindBuckets).
type Buckets struct {
	JS          jetstream.JetStream
	Lease       jetstream.KeyValue // <bucket>_lease
	TTL         time.Duration      // the lease bucket's TTL in force
	Checkpoints jetstream.KeyValue // <bucket>_checkpoint
	Dumps       jetstream.ObjectStore
	Replicas    int // the buckets' replicas asked for
	Name        string
}

// BindBuckets creates (or binds) the buckets <name>_lease (with ttl when
// created), _checkpoint and _snapshot with replicas (at least 1; an
// existing bucket with others is changed, see lease.Replicas). The handles
// create a bucket again when it is found gone.
func BindBuckets(ctx context.Context, js jetstream.JetStream, name string, ttl time.Duration, replicas int, log *slog.Logger) (*Buckets, error) {
	opts := []lease.BucketOption{lease.Replicas(replicas), lease.BucketLogger(log)}
	kv, ttl, err := lease.Bucket(ctx, js, name+"_lease", ttl, opts...)
	if err != nil {
		return nil, err
	}
	ckv, err := lease.CheckpointBucket(ctx, js, name+"_checkpoint", opts...)
	if err != nil {
		return nil, err
	}
	dumps, err := mirror.DumpBucket(ctx, js, name+"_snapshot", opts...)
	if err != nil {
		return nil, err
	}
	return &Buckets{JS: js, Lease: kv, TTL: ttl, Checkpoints: ckv, Dumps: dumps, Replicas: replicas, Name: name}, nil
}

// buckets binds the group's buckets, or takes Config.Buckets.
func (r *Replica) buckets(ctx context.Context, js jetstream.JetStream) (*Buckets, error) {
	// The stream first: the buckets' replicas follow its own.
	if r.cfg.EnsureStream != nil {
		if err := r.cfg.EnsureStream(ctx); err != nil {
			return nil, err
		}
	}
	if b := r.cfg.Buckets; b != nil {
		return b, nil
	}
	replicas := r.cfg.Replicas
	if replicas <= 0 {
		s, err := js.Stream(ctx, r.cfg.Stream)
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", r.cfg.Stream, err)
		}
		replicas = max(s.CachedInfo().Config.Replicas, 1)
	}
	return BindBuckets(ctx, js, r.cfg.Bucket, r.cfg.TTL, replicas, r.log)
}

func (r *Replica) bind(ctx context.Context, js jetstream.JetStream) error {
	b, err := r.buckets(ctx, js)
	if err != nil {
		return err
	}
	js, kv, ttl, ckv, dumps, name, replicas := b.JS, b.Lease, b.TTL, b.Checkpoints, b.Dumps, b.Name, b.Replicas
	key, err := handles{lease: kv, ckpt: ckv, dumps: dumps}.groupKey(ctx, r.cfg.Key, r.cfg.LegacyKey, r.cfg.Shop)
	if err != nil {
		return err
	}
	if key != r.cfg.Key {
		r.log.Info("hot standby: the group keeps the key of its earlier version (its lease, checkpoint or snapshot is there); watcher reset starts it over under the new key",
			"key", key, "new_key", r.cfg.Key)
	}
	r.key.Store(&key)
	r.ckpts, r.ckv = lease.NewCheckpoints(ckv, key), ckv
	r.mirror, err = mirror.New(mirror.Config{
		JS: js, Stream: r.cfg.Stream, SubjectPrefix: r.cfg.SubjectPrefix, Store: r.cfg.Store,
		Checkpoints: r.ckpts, Dumps: dumps, Key: key, Shop: r.cfg.Shop, Source: r.cfg.Source, Logger: r.log, Own: append(slices.Clone(r.cfg.Own), UnsentRecord), Lock: r.cfg.FileLock,
		OnApplied: func(n int) { r.applied.Add(float64(n)) }, BeforeTenure: r.applyGroupLimits, Prefetch: r.prefetchClock, Merge: r.restoreRecord,
	})
	if err != nil {
		return err
	}
	l := lease.New(kv, ttl, lease.Config{
		Key: key, Instance: r.cfg.Instance, Host: r.cfg.Host, File: r.mirror.File(), Lock: r.cfg.FileLock, Shop: r.cfg.ShopURL, ShopID: r.cfg.Shop, Logger: r.log, Now: r.cfg.Now,
		Renew: r.cfg.Renew, Margin: r.cfg.Margin, NoWatch: r.cfg.Buckets != nil,
		OnChange: func(bool) {
			select {
			case r.changed <- struct{}{}:
			default:
			}
		},
	})
	before, err := (handles{lease: kv, ckpt: ckv}).owner(ctx, key, Owner{ID: r.cfg.Shop, URL: r.cfg.ShopURL})
	if err != nil {
		return err
	}
	if before != "" {
		r.log.Warn("hot standby: the group's shop had another URL under the same shop id: taken as the same shop under a new URL (two shops given one WATCHER_SHOP_ID would also look like this: give each its own)",
			"shop_id", r.cfg.Shop, "url_before", before, "url", r.cfg.ShopURL)
	}
	r.urlBefore.Store(&before)
	r.shown.Store(r.mirror)
	r.lease.Store(l)
	r.log.Info("hot standby: lease", "key", key, "instance", r.cfg.Instance, "ttl", ttl.String(), "bucket", name+"_lease", "replicas", replicas)
	return nil
}

// WakeLease makes the lease try to acquire (or renew) now: its key was
// seen deleted or expired (Config.Buckets: the process watches the bucket).
func (r *Replica) WakeLease() {
	if l := r.lease.Load(); l != nil {
		l.Wake()
	}
}

// Key is the group's key in force: Config.Key, or Config.LegacyKey while
// the group's state is under it (GroupKey); Config.Key before setup.
func (r *Replica) Key() string {
	if k := r.key.Load(); k != nil {
		return *k
	}
	return r.cfg.Key
}

// checkpointFailed logs a failed checkpoint write (or takeover): one the
// group's checkpoint refused because another replica writes it names that
// writer (the lease is demoted then).
func (r *Replica) checkpointFailed(msg string, err error) {
	var fe *lease.ForeignError
	switch {
	case errors.As(err, &fe):
		r.log.Warn(msg+": another replica writes the group's checkpoint, so this one is not the active one and stops", "writer", fe.Writer.Instance, "writer_nonce", fe.Writer.Nonce, "writer_tenure", fe.Writer.Epoch)
	case errors.Is(err, lease.ErrNotWriter):
		r.log.Warn(msg+": another replica writes the group's checkpoint, so this one is not the active one and stops", "err", err)
	default:
		r.log.Warn(msg, "err", err)
	}
}

// otherHolds says whether another process holds the lease now (false when
// nobody does or NATS does not answer).
func (r *Replica) otherHolds(ctx context.Context) bool {
	l := r.lease.Load()
	hctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	v, found, err := l.Holder(hctx)
	return err == nil && found && !l.Mine(v)
}

// noteHolder notes who holds the lease (for the state report): this
// replica while it is active (its lease says so: no read), else what the
// key holds. (Read every second by every active pipeline too, it was a
// NATS request a second per shop of a fleet at rest.)
func (r *Replica) noteHolder(ctx context.Context) {
	l := r.lease.Load()
	if l == nil {
		return
	}
	if l.Active() {
		v := l.Value()
		v.Since = v.Since.UTC() // as the key holds it
		r.holder.Store(v)
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

// Holder says who holds the lease of the group key in the bucket
// <bucket>_lease (watcher check): found is false when nobody does;
// exists is false when no replica has run yet (no bucket).
func Holder(ctx context.Context, nc *nats.Conn, bucket, key string) (v lease.Value, found, exists bool, err error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return v, false, false, err
	}
	kv, err := js.KeyValue(ctx, bucket+"_lease")
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return v, false, false, nil
	}
	if err != nil {
		return v, false, false, err
	}
	v, found, err = lease.New(kv, time.Second, lease.Config{Key: key}).Holder(ctx)
	return v, found, true, err
}

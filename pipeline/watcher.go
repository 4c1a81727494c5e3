package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/publisher"
	"github.com/orderwatch/orderwatch/replica"
	"github.com/orderwatch/orderwatch/state"
)

// Options are what a Watcher gets besides its configuration.
type Options struct {
	Logger *slog.Logger
	// Registerer receives the pipeline's metrics (and the replica's).
	// Several watchers in one process need distinct labels, e.g.
	// prometheus.WrapRegistererWith(prometheus.Labels{"shop": ...}, reg).
	// Default: a registry of its own, served on /metrics.
	Registerer prometheus.Registerer
	// Gatherer is what /metrics serves; required with a Registerer.
	Gatherer prometheus.Gatherer
	// Version names the binary to the shop (User-Agent) and in the log
	// [dev].
	Version string
	// Replica tunes the hot standby's delays (tests).
	Replica replica.Tuning
	// Now is the process's wall clock for the lease's informational times
	// (replica.Config.Now) [time.Now].
	Now func() time.Time
	// Host is what the process's pipelines share (NewHost): its NATS
	// connection, the hot standby's buckets, the bound on takeovers at once
	// and the HTTP listener. nil: New builds one of its own from the
	// configuration (connecting to NATS and listening on WATCHER_HTTP_ADDR),
	// closed by Close.
	Host *Host
}

// Watcher is one shop's wired pipeline: client -> poller -> state ->
// publisher -> NATS, with the hot standby when configured, and its HTTP
// endpoints.
type Watcher struct {
	cfg     *Config
	opt     Options
	log     *slog.Logger
	store   *state.Store
	host    *Host
	ownHost bool   // built by New: closed by Close
	unwake  func() // ends the host's wakes of the lease (nil without the hot standby)
	nc      *nats.Conn
	pub     *publisher.Publisher
	rep     *replica.Replica // nil when the hot standby is off
	metrics *metrics
	dwell   *dwellCollector // the status metrics (dwell.go)
	reg     *registered     // what it registered, unregistered by Close
	close   sync.Once

	work atomic.Pointer[workers] // replaced as a whole at a takeover

	sweepAlive, pubAlive atomic.Bool
	// loops is closed when the loops of the last start have ended: a start
	// waits for it, so two runs of one poller never overlap (a stop that
	// timed out leaves them finishing a write).
	loops            atomic.Pointer[chan struct{}]
	stateDownSince   atomic.Int64           // unix nanos when writes to the state file started failing
	lastOK           atomic.Int64           // unix nanos of the last verified sweep
	gap              atomic.Int64           // the current time between sweeps (nanos)
	lastSlice        atomic.Int64           // unix nanos of the last verified slice (first-sync progress)
	firstSyncPct     atomic.Int64           // percent of the first sync verified
	clockProblem     atomic.Value           // string: the last sweep's clock problem, "" when none
	shareInertWarned atomic.Bool            // the CALL_SHARE-inert warning was logged
	unleased         atomic.Pointer[string] // without the lease: why not calling ("" none; unleased.go)
}

// workers are what reads the state file when it is built: built at the
// start and again when a standby takes over with the group's state
// restored into its file. Immutable once published.
type workers struct {
	client  *plenty.Client
	poll    *poller.Poller
	timings *poller.Timings // settle and overlap in force (derived or explicit)
}

// New opens the state file, connects to NATS, builds the client, poller
// and publisher and listens on the HTTP address. It makes no call to the
// service. A configuration mistake is a *ConfigError.
func New(cfg *Config, opt Options) (_ *Watcher, err error) {
	if err := opt.setDefaults(); err != nil {
		return nil, err
	}
	w := &Watcher{cfg: cfg, log: opt.Logger, reg: &registered{Registerer: opt.Registerer}}
	opt.Registerer = w.reg
	w.opt = opt
	log := opt.Logger
	defer func() {
		if err != nil {
			w.Close()
		}
	}()
	w.store, err = state.Open(cfg.StatePath, state.Options{Timeout: 2 * time.Second, OutboxMax: cfg.OutboxMax, OnWritable: w.onWritable})
	if err != nil {
		return nil, StateOpenError(cfg.StatePath, err)
	}
	w.gap.Store(int64(cfg.PollInterval))
	if cfg.PollInterval <= 0 {
		w.gap.Store(int64(poller.DefaultGap)) // derived: until the first sweep says
	}
	w.clockProblem.Store("")
	w.firstSyncPct.Store(-1)
	scope, _ := cfg.ScopeSplit()
	if w.host = opt.Host; w.host == nil {
		w.ownHost = true
		w.host, err = NewHost(HostConfig{Config: cfg, Listen: cfg.HTTPAddr, Logger: log})
		if err != nil {
			return nil, err
		}
	}
	w.nc = w.host.Conn()
	if w.pub, err = w.newPublisher(); err != nil {
		return nil, ConfigErrorf("%v", err)
	}
	if err := w.refuseOtherShop(); err != nil {
		return nil, err
	}
	if cfg.Lease && cfg.Stream != "" {
		w.bindBuckets()
		w.rep = w.newReplica()
		w.unwake = w.host.wakeOnLeaseGone([]string{cfg.GroupKey(), cfg.LegacyGroupKey()}, w.WakeLease)
	}
	if err := w.newWorkers(); err != nil {
		return nil, err
	}
	m := w.newMetrics() // after the workers: its gauges read them
	w.dwell = newDwellCollector(w.store, time.Now)
	w.opt.Registerer.MustRegister(w.dwell)
	if sent := ScopeSentText(scope); sent != "" || scope.Local != nil {
		log.Info("scope split", "sent", sent, "evaluated", scope.Local.String())
	}
	if st, err := w.store.Stats(); err == nil && st.BaselineDone {
		// Known from the file before the first sweep reports: alerts gated
		// on a finished first sync work from the start after a restart.
		m.firstSync.Set(1)
		w.firstSyncPct.Store(100)
	}
	return w, nil
}

// setDefaults fills in the options New was not given.
func (opt *Options) setDefaults() error {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Registerer == nil {
		reg := prometheus.NewRegistry()
		opt.Registerer, opt.Gatherer = reg, reg
	}
	if opt.Gatherer == nil {
		return errors.New("watcher: Options.Gatherer is required with Options.Registerer (what /metrics serves)")
	}
	if opt.Version == "" {
		opt.Version = "dev"
	}
	return nil
}

// newPublisher is the shop's publisher on the host's connection, feeding the
// metrics and gated by the lease.
func (w *Watcher) newPublisher() (*publisher.Publisher, error) {
	cfg := w.cfg
	return publisher.New(w.nc, w.store, publisher.Config{
		Stream: cfg.Stream, CreateStream: cfg.StreamCreate, SubjectPrefix: cfg.SubjectPrefix,
		DuplicateWindow: cfg.DuplicateWindow, MaxAge: cfg.StreamMaxAge, MaxBytes: cfg.StreamMaxBytes,
		Replicas: cfg.StreamReplicas, MaxInFlight: cfg.PublishInFlight, Logger: w.log,
		OnPublished: func(n int, _ time.Duration) { w.metrics.published.Add(float64(n)) },
		OnError:     func(error) { w.metrics.publishErrors.Inc() },
		OnDuplicate: func() { w.metrics.publishDups.Inc() },
		OnLookup:    func(r string) { w.metrics.dedupLookups.WithLabelValues(r).Inc() },
		Gate:        w.gate,
		Shop:        cfg.Shop(), ShopURL: cfg.PlentyURL, StreamOwner: w.host.cfg.StreamOwner,
	})
}

// refuseOtherShop fails with a configuration error, naming both shops,
// when the stream (JetStream mode) or the group's lease belongs to another
// shop (publisher.ErrOtherShop, replica.ErrShopConflict). Other errors
// (NATS slow, no permission to look) are left to the loops, which check
// again and retry.
func (w *Watcher) refuseOtherShop() error {
	if !w.nc.IsConnected() || w.host.Buckets() != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.pub.EnsureStream(ctx); errors.Is(err, publisher.ErrOtherShop) {
		var oe *publisher.OwnerError
		if w.cfg.ShopID == "" && errors.As(err, &oe) {
			return ConfigErrorf("%v; if it is this shop under a new URL, set %s_SHOP_ID=%s on every replica (the shop's id is then its own, not its URL's)", err, EnvPrefix, oe.Owner)
		}
		return ConfigErrorf("%v", err)
	}
	if !w.cfg.Lease || w.cfg.Stream == "" {
		return nil
	}
	key, err := replica.GroupKey(ctx, w.nc, w.cfg.LeaseBucket, w.cfg.GroupKey(), w.cfg.LegacyGroupKey(), w.cfg.Shop())
	if err != nil {
		return nil
	}
	if err := replica.CheckOwner(ctx, w.nc, w.cfg.LeaseBucket, key, replica.Owner{ID: w.cfg.Shop(), URL: w.cfg.PlentyURL}); errors.Is(err, replica.ErrShopConflict) {
		return ConfigErrorf("%v", err)
	}
	return nil
}

// bindBuckets has the host bind the hot standby's buckets, as a fleet
// member does before its first pipeline (a no-op then): the lease bucket
// watched once by the host, the buckets handed to the replica. When NATS
// does not answer now, the replica binds them itself once it does (and
// its lease watches its key itself).
func (w *Watcher) bindBuckets() {
	if w.host.Buckets() != nil || !w.nc.IsConnected() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	js, err := jetstream.New(w.nc, jetstream.WithDefaultTimeout(5*time.Second))
	if err == nil {
		_, err = w.host.BindBuckets(ctx, js, w.cfg.Stream, w.cfg.LeaseBucket, w.cfg.LeaseTTL, w.cfg.LeaseReplicas)
	}
	if err != nil {
		w.log.Warn("hot standby: the buckets cannot be bound yet; the replica binds them when NATS answers", "err", err)
	}
}

// newReplica builds the hot standby of the pipeline.
func (w *Watcher) newReplica() *replica.Replica {
	host, _ := os.Hostname()
	id := w.cfg.InstanceID
	if id == "" {
		id = host
	}
	limits, merges := LimitRecords()
	// The feed watches the host's checkpoint bucket: only with its buckets.
	buckets, feed := w.host.Buckets(), w.host.LimitsFeed()
	if buckets == nil {
		feed = nil
	}
	return replica.New(replica.Config{
		NC: w.nc, Store: w.store, FileLock: w.store.LockID(), EnsureStream: w.pub.EnsureStream, Stream: w.cfg.Stream, SubjectPrefix: w.cfg.SubjectPrefix,
		Key: w.cfg.GroupKey(), LegacyKey: w.cfg.LegacyGroupKey(), Instance: id, Host: host, Bucket: w.cfg.LeaseBucket, TTL: w.cfg.LeaseTTL, Replicas: w.cfg.LeaseReplicas,
		Shop: w.cfg.Shop(), ShopURL: w.cfg.PlentyURL, Source: w.cfg.EventSource(),
		Own: []string{publisher.PublisherRecord}, Limits: limits, Merges: merges, Logger: w.log, Registerer: w.opt.Registerer, Tuning: w.opt.Replica, Now: w.opt.Now,
		Buckets: buckets, Takeovers: w.host.takeovers, LimitsFeed: feed,
	})
}

// WakeLease makes the hot standby's lease try to acquire now: its key was
// seen deleted or expired (Host.BindBuckets). No-op without the hot standby.
func (w *Watcher) WakeLease() {
	if w.rep != nil {
		w.rep.WakeLease()
	}
}

// Ready says whether the pipeline does its job now, and why not (what
// /readyz answers).
func (w *Watcher) Ready() (bool, string) { return Ready(w.status()) }

// Working says whether this pipeline's sweep and publish loops run: with
// the hot standby, whether it is the active replica of its shop.
func (w *Watcher) Working() bool {
	if w.rep == nil {
		return w.sweepAlive.Load()
	}
	return w.rep.Working()
}

// newWorkers builds the client, the poller and the timings from the
// configuration and the state file (what they keep in it is read now) and
// publishes them at once. It makes no call to the service.
func (w *Watcher) newWorkers() error {
	cfg := w.cfg
	scope, _ := cfg.ScopeSplit()
	source := cfg.EventSource()
	client, err := plenty.New(plenty.Config{
		BaseURL: cfg.PlentyURL, Username: cfg.PlentyUsername, Password: cfg.PlentyPassword,
		APIVersion: cfg.PlentyAPIVersion, APIVendor: cfg.PlentyAPIVendor, Timeout: cfg.PlentyTimeout,
		UserAgent: w.userAgent(), Tokens: w.store, Sessions: w.records(), Waits: w.records(),
		Logger:     w.log.With("component", "client"),
		Gate:       w.gate,
		OnResponse: func(c plenty.CallInfo) { w.metrics.observeCall(c) },
		OnLogin:    func(r plenty.LoginResult) { w.metrics.observeLogin(r) },
		OnClockJump: func(jump time.Duration, accepted bool) {
			if !accepted {
				w.metrics.clockProblems.Inc()
				w.metrics.clockJump(jump, "rejected")
			} else {
				w.metrics.clockJump(jump, "accepted")
			}
		},
	})
	if err != nil {
		return ConfigErrorf("%v", err)
	}
	var sweepStore poller.Store = w.store
	if w.rep != nil {
		sweepStore = fencedStore{w.store, w.rep}
	}
	poll, err := poller.New(client, sweepStore, poller.Config{
		Settle: cfg.Settle, Overlap: cfg.Overlap, StartFrom: cfg.StartFrom.Time(time.Now()),
		Scope: scope.Sent, ScopeComplex: scope.SentGroup, ScopeLocal: scope.Local, With: cfg.With, LazyLoaded: cfg.LazyLoaded,
		ItemsPerPage: cfg.ItemsPerPage, SlicePages: cfg.SlicePages, Keyset: poller.KeysetMode(cfg.Keyset),
		BadEntries: poller.BadEntryPolicy(cfg.BadEntries), EmitBaseline: cfg.BaselineEvents, EmitUpdated: cfg.EmitUpdated,
		Source: source, SubjectPrefix: cfg.SubjectPrefix,
		OnCommit:    func(types []diff.Type) { w.metrics.committed(types); w.pub.Notify() },
		OnBaseline:  w.onBaseline,
		OnProgress:  w.onProgress,
		OnClockJump: func(jump time.Duration, decision string) { w.metrics.clockJump(jump, decision) },
		Yield:       w.host.yield,
		Logger:      w.log.With("component", "poller"),
	})
	if err != nil {
		return ConfigErrorf("%v", err)
	}
	// The timings read the measured late arrivals from the state file: at a
	// takeover, the group's (restored from the checkpoint).
	timings := poller.NewTimings(poller.TimingsConfig{
		Settle: cfg.Settle, Overlap: cfg.Overlap, Records: w.store, Logger: w.log.With("component", "timings"),
	})
	w.work.Store(&workers{client: client, poll: poll, timings: timings})
	return nil
}

// records is the state file's records as the client and the poller save
// them: with the hot standby, a change of the waits, the sessions or the
// budget reaches the group at once (replica.Records).
func (w *Watcher) records() replica.RecordStore {
	if w.rep == nil {
		return w.store
	}
	return w.rep.Records(w.store)
}

// fencedStore is the state file as the sweep of a replica commits to it:
// a commit after the replica's demotion is refused (replica.Fence).
type fencedStore struct {
	*state.Store
	rep *replica.Replica
}

func (s fencedStore) Commit(c state.Commit) error {
	return s.rep.Fence(func() error { return s.Store.Commit(c) })
}

// cl is the current client (replaced at a takeover).
func (w *Watcher) cl() *plenty.Client { return w.work.Load().client }

// gate is the client's and the publisher's Gate: with the hot standby,
// nothing goes to the shop or the stream unless this process holds the
// lease before its deadline.
func (w *Watcher) gate() error {
	if w.rep == nil {
		if why := w.unleasedConflict(); why != "" {
			return errors.New(why)
		}
		return nil
	}
	return w.rep.Gate()
}

// userAgent names the replica to the shop (its access log tells the
// replicas apart).
func (w *Watcher) userAgent() string {
	if w.rep == nil {
		return "orderwatch/" + w.opt.Version
	}
	return "orderwatch/" + w.opt.Version + " (" + w.rep.Instance() + ")"
}

// HTTPURL is the base URL of the HTTP endpoints of the process ("" when
// it listens on none).
func (w *Watcher) HTTPURL() string {
	if a := w.host.Addr(); a != "" {
		return "http://" + a
	}
	return ""
}

func (w *Watcher) httpAddr() string {
	if a := w.host.Addr(); a != "" {
		return a
	}
	return "none"
}

// Run works until ctx is done, then shuts down within the configured
// time and closes the watcher.
func (w *Watcher) Run(ctx context.Context) error {
	w.host.Serve(w.Handler()) // unless the process serves its own (a fleet)
	cfg := w.cfg
	w.log.Info("orderwatch started", "version", w.opt.Version, "service", cfg.PlentyURL, "nats", publisher.RedactURL(cfg.NATSURL),
		"stream", cfg.Stream, "state", cfg.StatePath, "http", w.httpAddr(), "interval", durationOrDerived(cfg.PollInterval),
		"settle", durationOrDerived(cfg.Settle), "overlap", durationOrDerived(cfg.Overlap))

	// The status metrics, from this replica's snapshot whatever its role
	// (a standby's is mirrored).
	dctx, dstop := context.WithCancel(ctx)
	dwellDone := make(chan struct{})
	go func() { defer close(dwellDone); w.runDwell(dctx) }()

	var start time.Time
	var left int
	if w.rep != nil {
		start, left = w.rep.Run(ctx, hooks{w})
	} else {
		if cfg.Stream != "" {
			w.watchGroupLease(ctx) // a hot-standby group beside this watcher?
		}
		stop := w.start(ctx)
		<-ctx.Done()
		start = time.Now()
		left = stop(true)
	}
	dstop()
	<-dwellDone // a scan in hand ends first (well under a second)
	w.Close()
	w.log.Info("stopped", "outbox_left", left, "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// hooks are the watcher as the replica sees it (replica.Pipeline).
type hooks struct{ w *Watcher }

func (p hooks) Start(ctx context.Context) func(flush bool) int { return p.w.start(ctx) }

func (p hooks) Restored() error {
	if err := p.w.newWorkers(); err != nil {
		return err
	}
	p.w.lastOK.Store(0)
	return nil
}

func (p hooks) Rescan(from time.Time, applied func()) { p.w.work.Load().poll.Rescan(from, applied) }

// start runs the sweep and publish loops until ctx ends or the returned
// stop is called. stop ends them (the page in hand is finished) within the
// shutdown timeout and, with flush, publishes what is left in the outbox
// (bounded by the same timeout); it returns the entries left.
func (w *Watcher) start(ctx context.Context) (stop func(flush bool) int) {
	if prev := w.loops.Load(); prev != nil {
		select {
		case <-*prev:
		case <-ctx.Done():
			return func(bool) int { return w.store.OutboxDepth() }
		}
	}
	wk := w.work.Load()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	done := make(chan struct{})
	w.loops.Store(&done)
	go func() { wg.Wait(); close(done) }()
	go func() {
		defer wg.Done()
		w.sweepAlive.Store(true)
		defer w.sweepAlive.Store(false)
		_ = wk.poll.Run(ctx, poller.RunConfig{
			Interval: w.cfg.PollInterval, CallShare: w.cfg.CallShare,
			Throttle: wk.client.Throttle, OnSweep: w.onSweep, Timings: wk.timings,
			Calls: wk.client.Calls, Records: w.records(),
		})
	}()
	go func() {
		defer wg.Done()
		w.pubAlive.Store(true)
		defer w.pubAlive.Store(false)
		if err := w.pub.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			w.log.Error("publisher stopped", "err", err)
		}
	}()
	return func(flush bool) int {
		start := time.Now()
		if flush {
			w.log.Info("shutting down: finishing the page in hand, then flushing the outbox", "timeout", w.cfg.ShutdownTimeout.String())
		}
		cancel()
		select {
		case <-done:
		case <-time.After(w.cfg.ShutdownTimeout):
			w.log.Warn("the sweep or publish loop did not stop within the shutdown timeout; exiting without waiting")
		}
		if !flush {
			return w.store.OutboxDepth()
		}
		flushCtx, cancel := context.WithTimeout(context.Background(), max(w.cfg.ShutdownTimeout-time.Since(start), time.Second))
		defer cancel()
		err := w.pub.Flush(flushCtx)
		left := w.store.OutboxDepth()
		if err != nil {
			w.log.Warn("outbox not fully flushed; the rest is published at the next start", "left", left, "err", err)
		}
		return left
	}
}

func (w *Watcher) onSweep(st poller.Stats, err error) {
	w.metrics.observeSweep(st, err)
	if st.NextGap > 0 {
		w.gap.Store(int64(st.NextGap))
	}
	attrs := []any{
		"lo", st.Lo.Format(time.RFC3339), "hi", st.Hi.Format(time.RFC3339),
		"calls", st.Calls, "charged", st.Charged, "pages", st.Pages, "orders", st.Orders, "slices", st.Slices, "rescans", st.Rescans,
		"events", st.EventCount(), "bad_entries", st.BadEntries, "duration_ms", st.Duration.Milliseconds(),
		"watermark", st.Watermark.Format(time.RFC3339), "lag_s", int(st.WatermarkLag.Seconds()),
		"outbox", w.store.OutboxDepth(),
	}
	if st.Baseline {
		attrs = append(attrs, "baseline", true)
	}
	if st.GapReason != "" {
		attrs = append(attrs, "next_gap_s", st.NextGap.Seconds(), "gap_reason", st.GapReason)
	}
	if !st.Held.IsZero() {
		attrs = append(attrs, "held_at", st.Held.Format(time.RFC3339))
	}
	if st.QuarantineEntered+st.QuarantineLeft+st.QuarantineRetries > 0 {
		attrs = append(attrs, "quarantine_entered", st.QuarantineEntered, "quarantine_left", st.QuarantineLeft, "quarantine_retried", st.QuarantineRetries)
	}
	if st.Probe {
		attrs = append(attrs, "probe", true) // read OverlapCeiling back (poller/timings.go)
	}
	if st.SecondLook {
		attrs = append(attrs, "second_look", true) // what left the overlap, read once more (poller/secondlook.go)
	}
	if len(st.LateArrivals) > 0 {
		attrs = append(attrs, "late_arrivals", len(st.LateArrivals), "latest_late_s", slices.Max(st.LateArrivals).Seconds())
	}
	if errors.Is(err, poller.ErrClock) {
		w.clockProblem.Store(err.Error())
	} else if err == nil {
		w.clockProblem.Store("")
	}
	if err != nil {
		w.log.Error("sweep failed; the watermark stays at the last verified slice", append(attrs, "err", err)...)
		return
	}
	w.lastOK.Store(time.Now().UnixNano())
	w.log.Info("sweep", attrs...)
	if w.rep != nil {
		w.rep.Swept() // a checkpoint
	}
	w.warnShareInert()
}

// onBaseline gives the group the first sync's baseline before its first
// reading call (poller.Config.OnBaseline): a checkpoint.
func (w *Watcher) onBaseline(ctx context.Context, _ time.Time) error {
	if w.rep == nil {
		return nil
	}
	return w.rep.Checkpoint(ctx)
}

// warnShareInert says once, after the first verified sweep, when the
// service's answers carry no long-period throttle headers: the call budget
// (WATCHER_CALL_SHARE) is sized from them and is inert without them.
func (w *Watcher) warnShareInert() {
	if w.cl().Throttle().Long.Present || !w.shareInertWarned.CompareAndSwap(false, true) {
		return
	}
	w.log.Warn("the service's answers carry no long-period throttle headers ("+plenty.PrefixLong+"-*): WATCHER_CALL_SHARE has no effect, the sweeps run every WATCHER_POLL_INTERVAL and only the pacer's reserve of the short period limits the calls",
		"call_share", w.cfg.CallShare, "interval", w.cfg.PollInterval.String())
}

// onProgress is the poller's page-by-page report.
func (w *Watcher) onProgress(p poller.Progress) {
	w.metrics.observeProgress(p)
	if p.FirstSync < 0 {
		return
	}
	if pct := int64(100 * p.FirstSync); pct != w.firstSyncPct.Swap(pct) || p.NewCalls == 0 {
		w.lastSlice.Store(time.Now().UnixNano()) // the position moved (or a slice was verified)
	}
}

// onWritable logs the start and the end of a period of failing writes to
// the state file, once each.
func (w *Watcher) onWritable(err error) {
	if err != nil {
		w.stateDownSince.Store(time.Now().UnixNano())
		w.log.Error("state file not writable: not ready; the sweep waits with what it read (no calls to the service) and retries its commit every second; nothing new is published",
			"state", w.cfg.StatePath, "err", err)
		return
	}
	attrs := []any{"state", w.cfg.StatePath}
	if since := w.stateDownSince.Load(); since != 0 {
		attrs = append(attrs, "after", time.Since(time.Unix(0, since)).Round(time.Millisecond).String())
	}
	w.log.Info("state file writable again: a commit worked, the sweep goes on", attrs...)
}

// Close closes the state file (and the host New built: its listener and
// NATS connection) and
// unregisters the metrics (Run does it when it returns); it may be called
// more than once.
func (w *Watcher) Close() {
	w.close.Do(func() {
		w.reg.unregister()
		if w.unwake != nil {
			w.unwake()
		}
		if w.ownHost && w.host != nil {
			w.host.Close()
		}
		if w.store != nil {
			if err := w.store.Close(); err != nil {
				w.log.Error("closing the state file", "err", err)
			}
		}
	})
}

// registered is a Registerer that remembers what it registered, so that
// a closed pipeline (or one New gave up on) leaves its registry as it found
// it: a process may build another for the same shop.
type registered struct {
	prometheus.Registerer
	mu sync.Mutex
	cs []prometheus.Collector
}

func (r *registered) Register(c prometheus.Collector) error {
	if err := r.Registerer.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cs = append(r.cs, c)
	return nil
}

func (r *registered) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *registered) unregister() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.cs {
		r.Registerer.Unregister(c)
	}
	r.cs = nil
}

// durationOrDerived renders a timing setting for the start-up line.
func durationOrDerived(d time.Duration) string {
	if d <= 0 {
		return "derived"
	}
	return d.String()
}

// lastErr keeps the text of the latest error a callback reported.
type lastErr struct{ p atomic.Pointer[string] }

func (l *lastErr) set(err error) {
	msg := err.Error()
	l.p.Store(&msg)
}

func (l *lastErr) get() string {
	if msg := l.p.Load(); msg != nil {
		return *msg
	}
	return ""
}

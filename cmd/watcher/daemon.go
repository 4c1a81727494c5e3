package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/publisher"
	"github.com/orderwatch/orderwatch/state"
)

// daemon is the wired watcher: client -> poller -> state -> publisher -> NATS,
// plus the HTTP endpoints. `run` and `demo` both use it.
type daemon struct {
	cfg     *Config
	log     *slog.Logger
	store   *state.Store
	wmu     sync.RWMutex // guards client and poll (replaced at a takeover)
	client  *plenty.Client
	poll    *poller.Poller
	nc      *nats.Conn
	pub     *publisher.Publisher
	rep     *replica        // hot standby (standby.go); nil when off
	timings *poller.Timings // settle and overlap in force (derived or explicit)
	metrics *metrics
	budget  *poller.Budget // the sweeps' call budget (persisted: record "budget"); used by the sweep loop only
	saveErr atomic.Bool    // the last save of record budget or waits failed (logged once)
	reg     *prometheus.Registry
	ln      net.Listener

	sweepAlive, pubAlive atomic.Bool
	stateDownSince       atomic.Int64 // unix nanos when writes to the state file started failing
	lastOK               atomic.Int64 // unix nanos of the last verified sweep
	gap                  atomic.Int64 // the current time between sweeps (nanos)
	lastSlice            atomic.Int64 // unix nanos of the last verified slice (first-sync progress)
	firstSyncPct         atomic.Int64 // percent of the first sync verified
	clockProblem         atomic.Value // string: the last sweep's clock problem, "" when none
	natsErr              lastErr      // why the last attempt to (re)connect to NATS failed
	shareInertWarned     atomic.Bool  // the CALL_SHARE-inert warning was logged
}

// newDaemon opens the state file, builds the client, poller and publisher
// and listens on the HTTP address. It makes no call to the service.
func newDaemon(cfg *Config, log *slog.Logger) (_ *daemon, err error) {
	d := &daemon{cfg: cfg, log: log, reg: prometheus.NewRegistry()}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	d.store, err = state.Open(cfg.StatePath, state.Options{Timeout: 2 * time.Second, OutboxMax: cfg.OutboxMax, OnWritable: d.onWritable})
	if err != nil {
		return nil, stateOpenError(cfg.StatePath, err)
	}
	d.gap.Store(int64(cfg.PollInterval))
	if cfg.PollInterval <= 0 {
		d.gap.Store(int64(poller.DefaultGap)) // derived: until the first sweep says
	}
	var m *metrics
	scope, _ := cfg.scope()
	d.nc, err = publisher.Connect(publisher.ConnConfig{
		URL: cfg.NATSURL, Name: "orderwatch", User: cfg.NATSUser, Password: cfg.NATSPassword, Token: cfg.NATSToken,
		CredsFile: cfg.NATSCreds, NKeyFile: cfg.NATSNKey, TLSCA: cfg.NATSTLSCA, TLSCert: cfg.NATSTLSCert, TLSKey: cfg.NATSTLSKey,
		Logger: log, OnConnectError: d.natsErr.set,
	})
	if err != nil {
		return nil, configErr("NATS at %s: %v", publisher.RedactURL(cfg.NATSURL), err)
	}
	d.pub, err = publisher.New(d.nc, d.store, publisher.Config{
		Stream: cfg.Stream, CreateStream: cfg.StreamCreate, SubjectPrefix: cfg.SubjectPrefix,
		DuplicateWindow: cfg.DuplicateWindow, MaxAge: cfg.StreamMaxAge, MaxBytes: cfg.StreamMaxBytes,
		Replicas: cfg.StreamReplicas, MaxInFlight: cfg.PublishInFlight, Logger: log,
		OnPublished: func(n int, _ time.Duration) { m.published.Add(float64(n)) },
		OnError:     func(error) { m.publishErrors.Inc() },
		OnDuplicate: func() { m.publishDups.Inc() },
		OnLookup:    func(r string) { m.dedupLookups.WithLabelValues(r).Inc() },
		Gate:        d.gate,
	})
	if err != nil {
		return nil, configErr("%v", err)
	}
	if cfg.Lease && cfg.Stream != "" {
		if d.rep, err = newReplica(d); err != nil {
			return nil, err
		}
	}
	if err := d.newWorkers(); err != nil {
		return nil, err
	}
	if sent := scopeSentText(scope); sent != "" || scope.Local != nil {
		log.Info("scope split", "sent", sent, "evaluated", scope.Local.String())
	}
	d.clockProblem.Store("")
	d.firstSyncPct.Store(-1)
	m = newMetrics(d.reg, liveSources{
		throttle:      func() plenty.Throttle { return d.cl().Throttle() },
		waited:        func() time.Duration { return d.cl().Pacer().Waited() },
		outboxDepth:   d.store.OutboxDepth,
		stateWritable: func() bool { return d.store.WriteErr() == nil },
		connected:     d.pub.Connected,
		serverNow: func() time.Time {
			t, _ := d.cl().ServerNow()
			return t
		},
		blockedUntil: func() time.Time { t, _ := d.cl().Pacer().Blocked(); return t },
		pending:      func() (plenty.Wait, bool) { return d.cl().Pacer().Pending() },
		startFrom:    cfg.StartFrom.Time(time.Now()),
		quarantined:  d.quarantined,
		timings:      func() poller.InForce { return d.tm().InForce() },
	})
	d.metrics = m
	if st, err := d.store.Stats(); err == nil && st.BaselineDone {
		// Known from the file before the first sweep reports: alerts gated
		// on a finished first sync work from the start after a restart.
		m.firstSync.Set(1)
		d.firstSyncPct.Store(100)
	}
	d.ln, err = net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		// The address is configuration (a port taken by another program is
		// fixed there too): exit 2, like every configuration error.
		return nil, configErr("listen on %s (WATCHER_HTTP_ADDR): %v", cfg.HTTPAddr, err)
	}
	return d, nil
}

// newWorkers builds the client and the poller from the configuration and
// the state file (what they keep in it is read now): at the start, and
// again when a standby takes over with the group's state restored into its
// file. It makes no call to the service.
func (d *daemon) newWorkers() error {
	cfg := d.cfg
	scope, _ := cfg.scope()
	source := cfg.Source
	if source == "" {
		source = cfg.PlentyURL
	}
	client, err := plenty.New(plenty.Config{
		BaseURL: cfg.PlentyURL, Username: cfg.PlentyUsername, Password: cfg.PlentyPassword,
		APIVersion: cfg.PlentyAPIVersion, APIVendor: cfg.PlentyAPIVendor, Timeout: cfg.PlentyTimeout,
		UserAgent: d.userAgent(), Tokens: d.store, Sessions: d.store,
		Logger:     d.log.With("component", "client"),
		Gate:       d.gate,
		OnResponse: func(c plenty.CallInfo) { d.metrics.observeCall(c) },
		OnLogin:    func(r plenty.LoginResult) { d.metrics.observeLogin(r) },
		OnWait:     d.saveWait,
		OnClockJump: func(jump time.Duration, accepted bool) {
			if !accepted {
				d.metrics.clockProblems.Inc()
				d.metrics.clockJump(jump, "rejected")
			} else {
				d.metrics.clockJump(jump, "accepted")
			}
		},
	})
	if err != nil {
		return configErr("%v", err)
	}
	poll, err := poller.New(client, d.store, poller.Config{
		Settle: cfg.Settle, Overlap: cfg.Overlap, StartFrom: cfg.StartFrom.Time(time.Now()),
		Scope: scope.Sent, ScopeComplex: scope.SentGroup, ScopeLocal: scope.Local, With: cfg.With, LazyLoaded: cfg.LazyLoaded,
		ItemsPerPage: cfg.ItemsPerPage, SlicePages: cfg.SlicePages, Keyset: poller.KeysetMode(cfg.Keyset),
		BadEntries: poller.BadEntryPolicy(cfg.BadEntries), EmitBaseline: cfg.BaselineEvents, EmitUpdated: cfg.EmitUpdated,
		Source: source, SubjectPrefix: cfg.SubjectPrefix,
		OnCommit:    func(int) { d.pub.Notify() },
		OnProgress:  d.onProgress,
		OnClockJump: func(jump time.Duration, decision string) { d.metrics.clockJump(jump, decision) },
		Logger:      d.log.With("component", "poller"),
	})
	if err != nil {
		return configErr("%v", err)
	}
	// The timings read the measured late arrivals from the state file: at a
	// takeover, the group's (restored from the checkpoint).
	timings := poller.NewTimings(poller.TimingsConfig{
		Settle: cfg.Settle, Overlap: cfg.Overlap, Records: d.store, Logger: d.log.With("component", "timings"),
	})
	d.wmu.Lock()
	d.client, d.poll, d.timings = client, poll, timings
	d.wmu.Unlock()
	d.restoreBudget() // budget.go: the budget and the pacer's waits from the state file
	return nil
}

// tm is the current timings (replaced at a takeover).
func (d *daemon) tm() *poller.Timings {
	d.wmu.RLock()
	defer d.wmu.RUnlock()
	return d.timings
}

// cl is the current client (replaced at a takeover).
func (d *daemon) cl() *plenty.Client {
	d.wmu.RLock()
	defer d.wmu.RUnlock()
	return d.client
}

// httpURL is the base URL of the HTTP endpoints.
func (d *daemon) httpURL() string { return "http://" + d.ln.Addr().String() }

// run works until ctx is done, then shuts down within the configured time.
func (d *daemon) run(ctx context.Context) error {
	srv := &http.Server{Handler: d.handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(d.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("HTTP server stopped", "err", err)
		}
	}()
	d.log.Info("orderwatch started", "version", version, "service", d.cfg.PlentyURL, "nats", publisher.RedactURL(d.cfg.NATSURL),
		"stream", d.cfg.Stream, "state", d.cfg.StatePath, "http", d.ln.Addr().String(), "interval", durationOrDerived(d.cfg.PollInterval),
		"settle", durationOrDerived(d.cfg.Settle), "overlap", durationOrDerived(d.cfg.Overlap))

	start := time.Now()
	var left int
	if d.rep != nil {
		start, left = d.runReplica(ctx) // standby.go
	} else {
		stop := d.startWorkers(ctx)
		<-ctx.Done()
		start = time.Now()
		left = stop(true)
	}
	shutCtx, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	_ = srv.Shutdown(shutCtx)
	d.close()
	d.log.Info("stopped", "outbox_left", left, "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// startWorkers runs the sweep and publish loops until ctx ends or the
// returned stop is called. stop ends them (the page in hand is finished)
// within the shutdown timeout and, with flush, publishes what is left in
// the outbox (bounded by the same timeout); it returns the entries left.
func (d *daemon) startWorkers(ctx context.Context) (stop func(flush bool) int) {
	d.wmu.RLock()
	client, poll, budget, timings := d.client, d.poll, d.budget, d.timings
	d.wmu.RUnlock()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		d.sweepAlive.Store(true)
		defer d.sweepAlive.Store(false)
		_ = poll.Run(ctx, poller.RunConfig{
			Interval: d.cfg.PollInterval, CallShare: d.cfg.CallShare,
			Throttle: client.Throttle, OnSweep: d.onSweep, Timings: timings,
			Budget: budget, Calls: client.Calls, OnBudget: d.saveBudget,
		})
	}()
	go func() {
		defer wg.Done()
		d.pubAlive.Store(true)
		defer d.pubAlive.Store(false)
		if err := d.pub.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			d.log.Error("publisher stopped", "err", err)
		}
	}()
	return func(flush bool) int {
		start := time.Now()
		if flush {
			d.log.Info("shutting down: finishing the page in hand, then flushing the outbox", "timeout", d.cfg.ShutdownTimeout.String())
		}
		cancel()
		loops := make(chan struct{})
		go func() { wg.Wait(); close(loops) }()
		select {
		case <-loops:
		case <-time.After(d.cfg.ShutdownTimeout):
			d.log.Warn("the sweep or publish loop did not stop within the shutdown timeout; exiting without waiting")
		}
		if !flush {
			return d.store.OutboxDepth()
		}
		flushCtx, cancel := context.WithTimeout(context.Background(), max(d.cfg.ShutdownTimeout-time.Since(start), time.Second))
		defer cancel()
		err := d.pub.Flush(flushCtx)
		left := d.store.OutboxDepth()
		if err != nil {
			d.log.Warn("outbox not fully flushed; the rest is published at the next start", "left", left, "err", err)
		}
		return left
	}
}

func (d *daemon) onSweep(st poller.Stats, err error) {
	d.applyRescan() // rescan.go: between two sweeps
	d.metrics.observeSweep(st, err)
	if st.NextGap > 0 {
		d.gap.Store(int64(st.NextGap))
	}
	attrs := []any{
		"lo", st.Lo.Format(time.RFC3339), "hi", st.Hi.Format(time.RFC3339),
		"calls", st.Calls, "charged", st.Charged, "pages", st.Pages, "orders", st.Orders, "slices", st.Slices, "rescans", st.Rescans,
		"events", st.EventCount(), "bad_entries", st.BadEntries, "duration_ms", st.Duration.Milliseconds(),
		"watermark", st.Watermark.Format(time.RFC3339), "lag_s", int(st.WatermarkLag.Seconds()),
		"outbox", d.store.OutboxDepth(),
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
		attrs = append(attrs, "probe", true) // read OverlapCeiling back (timings.go)
	}
	if len(st.LateArrivals) > 0 {
		attrs = append(attrs, "late_arrivals", len(st.LateArrivals), "latest_late_s", slices.Max(st.LateArrivals).Seconds())
	}
	if errors.Is(err, poller.ErrClock) {
		d.clockProblem.Store(err.Error())
	} else if err == nil {
		d.clockProblem.Store("")
	}
	if err != nil {
		d.log.Error("sweep failed; the watermark stays at the last verified slice", append(attrs, "err", err)...)
		return
	}
	d.lastOK.Store(time.Now().UnixNano())
	d.log.Info("sweep", attrs...)
	if d.rep != nil {
		d.rep.onCommitted() // standby.go: checkpoint
	}
	d.warnShareInert()
}

// warnShareInert says once, after the first verified sweep, when the
// service's answers carry no long-period throttle headers: the call budget
// (WATCHER_CALL_SHARE) is sized from them and is inert without them.
func (d *daemon) warnShareInert() {
	if d.cl().Throttle().Long.Present || !d.shareInertWarned.CompareAndSwap(false, true) {
		return
	}
	d.log.Warn("the service's answers carry no long-period throttle headers ("+plenty.PrefixLong+"-*): WATCHER_CALL_SHARE has no effect, the sweeps run every WATCHER_POLL_INTERVAL and only the pacer's reserve of the short period limits the calls",
		"call_share", d.cfg.CallShare, "interval", d.cfg.PollInterval.String())
}

// onProgress is the poller's page-by-page report.
func (d *daemon) onProgress(p poller.Progress) {
	d.metrics.observeProgress(p)
	if p.FirstSync < 0 {
		return
	}
	if pct := int64(100 * p.FirstSync); pct != d.firstSyncPct.Swap(pct) || p.NewCalls == 0 {
		d.lastSlice.Store(time.Now().UnixNano()) // the position moved (or a slice was verified)
	}
}

// onWritable logs the start and the end of a period of failing writes to
// the state file, once each.
func (d *daemon) onWritable(err error) {
	if err != nil {
		d.stateDownSince.Store(time.Now().UnixNano())
		d.log.Error("state file not writable: not ready; the sweep waits with what it read (no calls to the service) and retries its commit every second; nothing new is published",
			"state", d.cfg.StatePath, "err", err)
		return
	}
	attrs := []any{"state", d.cfg.StatePath}
	if since := d.stateDownSince.Load(); since != 0 {
		attrs = append(attrs, "after", time.Since(time.Unix(0, since)).Round(time.Millisecond).String())
	}
	d.log.Info("state file writable again: a commit worked, the sweep goes on", attrs...)
}

// ready says whether the watcher is doing its job: a verified sweep within
// three gaps (as stretched by the call budget), or during the first sync a
// verified slice within that time; the state file writable, NATS
// connected, the outbox below its limit, no clock problem, and no wait for
// the service's throttling longer than those three gaps pending, and no
// pause for a spent daily quota ("paused until T: daily quota spent").
func (d *daemon) ready() (bool, string) {
	if d.rep != nil && !d.rep.working.Load() {
		return d.standbyReady() // standby.go
	}
	last := d.lastOK.Load()
	window := 3 * time.Duration(d.gap.Load())
	if p, ok := d.paused(); ok {
		return false, p
	}
	if until, why := d.cl().Pacer().Blocked(); !until.IsZero() && time.Until(until) > window {
		return false, fmt.Sprintf("waiting for the service's throttling: no call before %s (%s)", until.UTC().Format(time.RFC3339), why)
	}
	if p, _ := d.clockProblem.Load().(string); p != "" {
		return false, p
	}
	firstSync := d.firstSyncPct.Load()
	switch {
	case d.store.WriteErr() != nil:
		return false, d.store.WriteErr().Error()
	case last == 0 && firstSync >= 0 && firstSync < 100:
		since := time.Since(time.Unix(0, d.lastSlice.Load()))
		if slice := d.lastSlice.Load(); slice == 0 || since > max(window, 2*time.Minute) {
			return false, cmp.Or(d.loginHeldText(), fmt.Sprintf("first sync stalled at %d%%: no progress for %s", firstSync, since.Round(time.Second)))
		}
	case last == 0:
		return false, cmp.Or(d.loginHeldText(), "no verified sweep yet")
	case time.Since(time.Unix(0, last)) > window:
		return false, cmp.Or(d.loginHeldText(), fmt.Sprintf("no verified sweep for %s", time.Since(time.Unix(0, last)).Round(time.Second)))
	}
	switch {
	case d.pub.Ready() != nil:
		if cause := d.natsErr.get(); cause != "" && !d.nc.IsConnected() {
			return false, fmt.Sprintf("%v (%s: %s)", d.pub.Ready(), publisher.RedactURL(d.cfg.NATSURL), cause)
		}
		return false, d.pub.Ready().Error()
	case d.cfg.OutboxMax > 0 && d.store.OutboxDepth() >= d.cfg.OutboxMax:
		return false, "outbox full"
	case last == 0:
		return true, fmt.Sprintf("first sync in progress: %d%%", firstSync)
	}
	return true, "ok"
}

// loginHeldText says why the sweeps cannot log in ("login refused until T
// (reason)" after refused credentials), "" when logins are not held back.
func (d *daemon) loginHeldText() string {
	until, why := d.client.LoginHeld()
	if until.IsZero() {
		return ""
	}
	what := "login held back"
	if errors.Is(why, plenty.ErrInvalidCredentials) || errors.Is(why, plenty.ErrUnauthorized) {
		what = "login refused"
	}
	return fmt.Sprintf("%s until %s (%v)", what, until.UTC().Format(time.RFC3339), why)
}

func (d *daemon) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		// A standby runs no sweep or publish loop; its mirror retries on
		// its own (readiness says when it is behind).
		if (d.rep == nil || d.rep.working.Load()) && (!d.sweepAlive.Load() || !d.pubAlive.Load()) {
			http.Error(w, "a loop has stopped", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ok, why := d.ready()
		if !ok {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, why)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{Registry: d.reg}))
	mux.HandleFunc("GET /state", d.serveStateReport)            // statecmd.go
	mux.HandleFunc("GET /state/orders/{id}", d.serveOrderState) // statecmd.go
	return mux
}

func (d *daemon) close() {
	if d.ln != nil {
		d.ln.Close()
	}
	if d.nc != nil {
		d.nc.Close()
	}
	if d.store != nil {
		if err := d.store.Close(); err != nil {
			d.log.Error("closing the state file", "err", err)
		}
	}
}

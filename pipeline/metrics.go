package pipeline

import (
	"errors"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/publisher"
)

// metrics are the pipeline's Prometheus figures (the process's own, Go
// and process collectors and the build info, are main's). Counters are fed by hooks of
// the client, the poller and the publisher; gauges read live values.
type metrics struct {
	apiCalls      *prometheus.CounterVec
	apiDuration   *prometheus.HistogramVec
	throttled     prometheus.Counter
	sweepDuration prometheus.Histogram
	sweeps        *prometheus.CounterVec
	sweepCalls    prometheus.Counter
	ordersScanned prometheus.Counter
	rescans       prometheus.Counter
	secondLooks   prometheus.Counter
	badEntries    prometheus.Counter
	events        *prometheus.CounterVec
	published     prometheus.Counter
	publishErrors prometheus.Counter
	publishDups   prometheus.Counter     // PubAcks that reported a duplicate
	dedupLookups  *prometheus.CounterVec // entries looked up in the stream before a re-send, by result
	lastSweepOK   prometheus.Gauge
	logins        *prometheus.CounterVec
	sweepGap      prometheus.Gauge
	readOwed      prometheus.Gauge
	budgetLeft    prometheus.Gauge
	lateArrival   prometheus.Histogram
	clockProblems prometheus.Counter
	rewinds       prometheus.Counter
	keysetSlices  prometheus.Counter
	firstSync     prometheus.Gauge
	position      prometheus.Gauge
	clockJumps    *prometheus.CounterVec

	watermark atomic.Int64 // unix seconds of the verified watermark
}

// liveSources are the values the gauges read when scraped.
type liveSources struct {
	throttle      func() plenty.Throttle
	waited        func() time.Duration
	outboxDepth   func() int
	stateWritable func() bool
	connected     func() bool
	serverNow     func() time.Time
	blockedUntil  func() time.Time // zero when no wait is pending
	startFrom     time.Time        // where the first sweep begins (lag before the first watermark)
	quarantined   func() int       // orders in quarantine (undecodable entries); -1 when unknown

	pending func() (plenty.Wait, bool) // the wait the service asked for (paused until, by reason)
	timings func() poller.InForce
}

func newMetrics(reg prometheus.Registerer, live liveSources) *metrics {
	m := &metrics{}
	m.addCallMetrics(reg)
	m.addSweepMetrics(reg)
	m.addPublishMetrics(reg)
	registerTimings(reg, live.timings)
	registerLive(reg, live, m)
	return m
}

// addCallMetrics registers the figures of the calls to the service: routes,
// durations, throttling, logins, the budget and the service's clock.
func (m *metrics) addCallMetrics(reg prometheus.Registerer) {
	m.apiCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orderwatch_api_calls_total", Help: "Calls to the REST service by route and HTTP status (0 = no response).",
	}, []string{"route", "code"})
	m.apiDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "orderwatch_api_call_duration_seconds", Help: "Duration of REST calls, body included.",
		Buckets: prometheus.ExponentialBuckets(0.025, 2, 10),
	}, []string{"route"})
	m.throttled = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderwatch_api_throttled_total", Help: "429 answers of the service.",
	})
	m.logins = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orderwatch_logins_total",
		Help: "Login requests by result: ok, refused, ambiguous (the answer was lost: a session may exist), session_limit, error (no session possible).",
	}, []string{"result"})
	for _, r := range []plenty.LoginResult{plenty.LoginOK, plenty.LoginRefused, plenty.LoginAmbiguous, plenty.LoginSessionLimit, plenty.LoginError} {
		m.logins.WithLabelValues(string(r))
	}
	m.budgetLeft = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "orderwatch_call_budget_remaining", Help: "Calls left in the sweeps' budget (WATCHER_CALL_SHARE of the daily quota, an hour's burst); negative while in debt; NaN until the service names its daily limit.",
	})
	m.budgetLeft.Set(math.NaN())
	m.clockProblems = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderwatch_clock_problems_total", Help: "Clock problems: a Date header that jumped against the monotonic clock (distrusted), or an empty sweep window (hi <= lo).",
	})
	m.clockJumps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orderwatch_clock_jumps_total",
		Help: "Jumps of the service's clock and what was decided: direction forward|backward; decision rejected (a Date header that jumped, distrusted), accepted (a Date that kept its new time for a minute: followed as the window's hint; the watermark stays bounded by the order stamps), rewound (changes stamped below the watermark confirmed a clock set back: the watermark was rewound).",
	}, []string{"direction", "decision"})
	reg.MustRegister(m.apiCalls, m.apiDuration, m.throttled, m.logins, m.budgetLeft, m.clockProblems, m.clockJumps)
}

// addSweepMetrics registers the figures of the sweeps and the read ledger.
func (m *metrics) addSweepMetrics(reg prometheus.Registerer) {
	m.sweepDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "orderwatch_sweep_duration_seconds", Help: "Duration of a sweep.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
	})
	m.sweeps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orderwatch_sweeps_total", Help: "Sweeps by result (ok, error).",
	}, []string{"result"})
	m.sweepCalls = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderwatch_sweep_calls_total", Help: "Search calls made by sweeps.",
	})
	m.ordersScanned = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderwatch_orders_scanned_total", Help: "Order entries read by sweeps (rescans included).",
	})
	m.rescans = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderwatch_rescans_total", Help: "Scans that failed verification (the result set changed) and were redone.",
	})
	m.secondLooks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderwatch_second_looks_total", Help: "Second looks: in a busy shop the sweeps read 5 s below the watermark and what left the overlap is read once more after a sweep (its calls are in orderwatch_sweep_calls_total).",
	})
	m.badEntries = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderwatch_bad_entries_total", Help: "Order entries that could not be decoded.",
	})
	m.lastSweepOK = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "orderwatch_last_verified_sweep_timestamp_seconds", Help: "When the last sweep completed without error (unix time).",
	})
	m.sweepGap = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "orderwatch_sweep_gap_seconds", Help: "Time from the start of the last sweep to the start of the next: the interval, longer when the call budget runs low.",
	})
	m.readOwed = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "orderwatch_read_owed_seconds", Help: "How long the oldest stamp the read ledger still owes a read at a promised age (the overlap; 5 minutes while the probes run) has been due: 0 while every read is on time; the probes' backoff (an hour at most) and a busy shop's probe reading its stretch (half an hour) keep it up to about 1.5 h.",
	})
	m.lateArrival = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "orderwatch_late_arrival_seconds", Help: "Changes that became visible after the sweeps had passed their updatedAt: how far below the watermark they were (compare with WATCHER_OVERLAP).",
		Buckets: prometheus.ExponentialBuckets(0.25, 2, 12),
	})
	m.rewinds = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderwatch_watermark_rewinds_total", Help: "Watermarks found ahead of server time minus settle and rewound.",
	})
	m.keysetSlices = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderwatch_keyset_slices_total", Help: "One-second bulk slices paged by orderId=gt: (per sweep that reads one).",
	})
	m.firstSync = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "orderwatch_first_sync_progress_ratio", Help: "Share of the first sync (from the start point to the baseline point) verified; 1 once it is done.",
	})
	m.position = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "orderwatch_sweep_position_timestamp_seconds", Help: "Window position (unix time, server clock) the running sweep has verified up to.",
	})
	reg.MustRegister(m.sweepDuration, m.sweeps, m.sweepCalls, m.ordersScanned, m.rescans, m.secondLooks, m.badEntries, m.lastSweepOK, m.sweepGap, m.readOwed, m.lateArrival, m.rewinds, m.keysetSlices, m.firstSync, m.position)
}

// addPublishMetrics registers the figures of the outbox and the publisher.
func (m *metrics) addPublishMetrics(reg prometheus.Registerer) {
	m.events = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orderwatch_events_total", Help: "Events written to the outbox by type.",
	}, []string{"type"})
	m.published = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderwatch_events_published_total", Help: "Events acknowledged by NATS and removed from the outbox.",
	})
	m.publishErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderwatch_publish_errors_total", Help: "Failed publish attempts (retried).",
	})
	m.publishDups = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderwatch_publish_duplicates_total", Help: "PubAcks that reported a duplicate: the stream already had the event (dropped by its Nats-Msg-Id within the duplicate window).",
	})
	m.dedupLookups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orderwatch_publish_dedup_lookups_total",
		Help: "Outbox entries that may already be in the stream, looked up on their subject before being sent again past the duplicate window, by result: stored (deleted without sending), not_stored (sent), error.",
	}, []string{"result"})
	for _, r := range []string{publisher.LookupStored, publisher.LookupNotStored, publisher.LookupError} {
		m.dedupLookups.WithLabelValues(r)
	}
	reg.MustRegister(m.events, m.published, m.publishErrors, m.publishDups, m.dedupLookups)
}

// registerLive registers the metrics read when scraped: waits, throttle
// periods, outbox, state file, NATS, watermark and quarantine.
func registerLive(reg prometheus.Registerer, live liveSources, m *metrics) {
	for _, reason := range []plenty.WaitReason{plenty.WaitDailyQuota, plenty.WaitThrottled, plenty.WaitReserve} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "orderwatch_paused_until_timestamp_seconds",
			Help:        "No call is made before this unix time, by reason: daily_quota (the daily quota is spent or down to the reserve: paused until it resets), throttled (a 429), period_reserve (a short period's reserve); 0 when no such wait is pending.",
			ConstLabels: prometheus.Labels{"reason": string(reason)},
		}, func() float64 {
			if w, ok := live.pending(); ok && w.Reason == reason {
				return float64(w.Until.Unix())
			}
			return 0
		}))
	}
	for _, period := range []string{"long", "short", "route"} {
		period := period
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orderwatch_api_calls_left", Help: "Calls left in the service's throttling period, as last reported.",
			ConstLabels: prometheus.Labels{"period": period},
		}, func() float64 {
			th := live.throttle()
			p := map[string]plenty.Period{"long": th.Long, "short": th.Short, "route": th.Route}[period]
			if !p.Present {
				return -1
			}
			return float64(p.CallsLeft)
		}))
	}
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "orderwatch_throttle_wait_seconds_total", Help: "Time spent waiting for the service's throttling (pacing, Retry-After).",
		}, func() float64 { return live.waited().Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orderwatch_outbox_depth", Help: "Events committed and not yet acknowledged by NATS.",
		}, func() float64 { return float64(live.outboxDepth()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orderwatch_state_writable", Help: "0 while the last write to the state file failed (disk full, read-only).",
		}, func() float64 { return b2f(live.stateWritable()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orderwatch_nats_connected", Help: "1 when connected to NATS.",
		}, func() float64 { return b2f(live.connected()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orderwatch_watermark_timestamp_seconds", Help: "The verified watermark (unix time, server clock): every change up to it has been recorded.",
		}, func() float64 { return float64(m.watermark.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orderwatch_watermark_lag_seconds", Help: "Server time minus the verified watermark (before the first, minus the start point): how far behind the sweep is.",
		}, func() float64 {
			now := live.serverNow()
			if now.IsZero() {
				return 0 // the service's clock is not known yet
			}
			if wm := m.watermark.Load(); wm != 0 {
				return now.Sub(time.Unix(wm, 0)).Seconds()
			}
			return now.Sub(live.startFrom).Seconds()
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orderwatch_quarantined_orders", Help: "Orders in quarantine: their entries cannot be decoded, the other orders flow on, these are retried by id (watcher state lists them with the reason).",
		}, func() float64 { return float64(live.quarantined()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "orderwatch_throttle_blocked_until_timestamp_seconds", Help: "No call is made before this unix time (Retry-After, a spent quota); 0 when no wait is pending.",
		}, func() float64 {
			if t := live.blockedUntil(); !t.IsZero() {
				return float64(t.Unix())
			}
			return 0
		}),
	)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// observeCall is the client's OnResponse hook.
func (m *metrics) observeCall(c plenty.CallInfo) {
	m.apiCalls.WithLabelValues(c.Route, strconv.Itoa(c.Status)).Inc()
	m.apiDuration.WithLabelValues(c.Route).Observe(c.Duration.Seconds())
	if c.Status == 429 {
		m.throttled.Inc()
	}
}

// observeLogin is the client's OnLogin hook.
func (m *metrics) observeLogin(r plenty.LoginResult) { m.logins.WithLabelValues(string(r)).Inc() }

// committed counts the events of a commit (poller.Config.OnCommit).
func (m *metrics) committed(types []diff.Type) {
	for _, t := range types {
		m.events.WithLabelValues(string(t)).Inc()
	}
}

// observeSweep records one sweep's figures.
func (m *metrics) observeSweep(st poller.Stats, err error) {
	m.sweepDuration.Observe(st.Duration.Seconds())
	// Calls and orders are counted page by page (observeProgress).
	m.rescans.Add(float64(st.Rescans))
	if st.SecondLook {
		m.secondLooks.Inc()
	}
	m.badEntries.Add(float64(st.BadEntries))
	if !st.Watermark.IsZero() {
		m.watermark.Store(st.Watermark.Unix())
	}
	m.sweepGap.Set(st.NextGap.Seconds())
	m.readOwed.Set(st.ReadOwed.Seconds())
	if st.BudgetKnown {
		m.budgetLeft.Set(st.BudgetLeft)
	}
	for _, d := range st.LateArrivals {
		m.lateArrival.Observe(d.Seconds())
	}
	if !st.Rewound.IsZero() {
		m.rewinds.Inc()
	}
	m.keysetSlices.Add(float64(st.KeysetSlices))
	if errors.Is(err, poller.ErrClock) {
		m.clockProblems.Inc()
	}
	if err != nil {
		m.sweeps.WithLabelValues("error").Inc()
		return
	}
	m.sweeps.WithLabelValues("ok").Inc()
	m.lastSweepOK.Set(float64(time.Now().Unix()))
}

// observeProgress moves the figures of a running sweep page by page.
func (m *metrics) observeProgress(p poller.Progress) {
	m.sweepCalls.Add(float64(p.NewCalls))
	m.ordersScanned.Add(float64(p.NewOrders))
	if !p.Watermark.IsZero() {
		m.watermark.Store(p.Watermark.Unix())
	}
	if !p.Position.IsZero() {
		m.position.Set(float64(p.Position.Unix()))
	}
	if p.FirstSync >= 0 {
		m.firstSync.Set(p.FirstSync)
	}
}

// clockJump counts a jump of the service's clock and the decision about it.
func (m *metrics) clockJump(jump time.Duration, decision string) {
	dir := "forward"
	if jump < 0 {
		dir = "backward"
	}
	m.clockJumps.WithLabelValues(dir, decision).Inc()
}

// timingSources are every source a timing can have (the info metric's
// label values).
var timingSources = []string{poller.SourceExplicit, poller.SourceBudget, poller.SourceLate, poller.SourceDefault}

// registerTimings adds the interval, settle and overlap in force, why
// (orderwatch_timing_source_info), and the late arrivals found beyond the
// overlap, read from the poller's Timings when scraped.
func registerTimings(reg prometheus.Registerer, in func() poller.InForce) {
	if in == nil {
		return
	}
	gauge := func(name, help string, v func(poller.InForce) time.Duration) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return v(in()).Seconds() })
	}
	reg.MustRegister(
		gauge("orderwatch_poll_interval_seconds", "The poll interval in force: WATCHER_POLL_INTERVAL, or derived from the call budget and the measured cost of a sweep (0 before the first sweep); orderwatch_sweep_gap_seconds is the gap with the budget's stretching.",
			func(i poller.InForce) time.Duration { return i.Interval }),
		gauge("orderwatch_settle_seconds", "The settle in force: WATCHER_SETTLE, or derived from the measured late arrivals.",
			func(i poller.InForce) time.Duration { return i.Settle }),
		gauge("orderwatch_overlap_seconds", "The overlap in force: WATCHER_OVERLAP, or derived from the measured late arrivals (a probe sweep every 5 minutes reads 10 minutes back).",
			func(i poller.InForce) time.Duration { return i.Overlap }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "orderwatch_late_arrivals_beyond_overlap_total",
			Help: "Changes that arrived later than the overlap in force, found by a probe sweep (published; each widened the overlap); kept in the state file.",
		}, func() float64 { return float64(in().BeyondOverlap) }),
	)
	for _, timing := range []string{"interval", "settle", "overlap"} {
		for _, source := range timingSources {
			reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name:        "orderwatch_timing_source_info",
				Help:        "1 for the source of each timing in force: explicit (a WATCHER_ setting), budget (the call budget), late_arrivals (measured), default (nothing measured yet).",
				ConstLabels: prometheus.Labels{"timing": timing, "source": source},
			}, func() float64 {
				i := in()
				return b2f(map[string]string{"interval": i.IntervalSource, "settle": i.SettleSource, "overlap": i.OverlapSource}[timing] == source)
			}))
		}
	}
}

// newMetrics registers the pipeline's metrics on the Registerer of its
// options, with the live values read from the watcher when scraped.
func (w *Watcher) newMetrics() *metrics {
	w.metrics = newMetrics(w.opt.Registerer, liveSources{
		throttle:      func() plenty.Throttle { return w.cl().Throttle() },
		waited:        func() time.Duration { return w.cl().Pacer().Waited() },
		outboxDepth:   w.store.OutboxDepth,
		stateWritable: func() bool { return w.store.WriteErr() == nil },
		connected:     w.nc.IsConnected,
		serverNow: func() time.Time {
			t, _ := w.cl().ServerNow()
			return t
		},
		blockedUntil: func() time.Time { t, _ := w.cl().Pacer().Blocked(); return t },
		pending:      func() (plenty.Wait, bool) { return w.cl().Pacer().Pending() },
		startFrom:    w.cfg.StartFrom.Time(time.Now()),
		quarantined: func() int {
			n, err := w.store.QuarantineCount()
			if err != nil {
				return -1
			}
			return n
		},
		timings: func() poller.InForce { return w.work.Load().timings.InForce() },
	})
	return w.metrics
}

package poller

import (
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"
)

// RecordStore is what Timings needs of the state file: named JSON records
// that survive a restart.
type RecordStore interface {
	SaveRecord(name string, v any) error
	LoadRecord(name string, v any) (bool, error)
}

// TimingsRecord is the name of the record Timings keeps in the state file.
const TimingsRecord = "timings"

// Bounds and pace of the derived settle and overlap.
const (
	SettleFloor    = time.Second
	SettleCeiling  = 30 * time.Second
	OverlapFloor   = 10 * time.Second
	OverlapCeiling = 10 * time.Minute
	// lagSamples late arrivals are kept, none older than lagMaxAge: one
	// slow commit keeps the overlap wide for a day.
	lagSamples = 256
	lagMaxAge  = 24 * time.Hour
	// shrinkEvery: settle and overlap move down by at most a fifth this
	// often (widening is at once).
	shrinkEvery = 10 * time.Minute
	shrinkTo    = 0.8
	// probeEvery: this often the window from OverlapCeiling back to the
	// overlap in force below the watermark is read again (a probe, one
	// slice after each sweep: the newest window first), and so a change
	// that arrived later than the overlap is found (and published): every
	// one up to OverlapCeiling - probeEvery late. A probe that finds
	// nothing doubles the time to the next, up to probeEveryMax, and its
	// window grows with it (probeLate + the time between probes), so that
	// the probes cost in proportion to what they find and still find every
	// change up to probeLate late; one that finds a change later than the
	// overlap brings it back to probeEvery.
	probeEvery    = 5 * time.Minute
	probeEveryMax = time.Hour
	probeLate     = OverlapCeiling - probeEvery
	// settleSamples: settle follows the lags once the day has this many.
	// One slow commit widens the overlap (re-reading costs calls), not the
	// settle (every change would wait for it).
	settleSamples = 5
)

// TimingsConfig configures Timings.
type TimingsConfig struct {
	// Settle and Overlap are explicit values (WATCHER_SETTLE, _OVERLAP):
	// when set (> 0) they are in force for good; 0 derives them.
	Settle, Overlap time.Duration
	// Records keeps the measured late arrivals across restarts (nil: in
	// memory only).
	Records RecordStore
	Logger  *slog.Logger
}

// InForce is what paces and bounds the sweeps now, and why: each source is
// one of SourceExplicit, SourceBudget, SourceLate or SourceDefault.
type InForce struct {
	Interval       time.Duration `json:"-"`
	IntervalSource string        `json:"intervalSource,omitempty"`
	Settle         time.Duration `json:"-"`
	SettleSource   string        `json:"settleSource"`
	Overlap        time.Duration `json:"-"`
	OverlapSource  string        `json:"overlapSource"`
	// LateArrivals is how many late arrivals the derived values rest on
	// (the last day's, at most 256); BeyondOverlap how many arrived later
	// than the overlap in force (found by a probe sweep) since the record
	// was started.
	LateArrivals  int       `json:"lateArrivals"`
	BeyondOverlap int64     `json:"beyondOverlap"`
	LastProbe     time.Time `json:"lastProbe,omitzero"`
	// ProbeEvery is the time from the last probe to the next.
	ProbeEvery time.Duration `json:"-"`
}

// Timings sizes settle and overlap from the late arrivals the sweeps
// measure (Stats.LateArrivals): a late arrival of d under a settle of s
// became visible at least s+d after its updatedAt (its lag). Settle
// follows the 90th percentile of the last day's lags (once there are five),
// overlap twice their maximum,
// each between its floor and ceiling. They widen at once and shrink
// slowly (by a fifth every 10 minutes at most), and every 5 minutes a
// probe reads OverlapCeiling back from the watermark, a slice after each
// sweep, so that a change later than the overlap in force is still found,
// counted, and widens the overlap. Nothing known (no record, an
// unreadable one): both at their floor, and a probe starts after the
// first sweep. Timings is safe for concurrent use.
type Timings struct {
	cfg TimingsConfig
	log *slog.Logger

	mu      sync.Mutex
	rec     timingsRecord
	in      InForce
	unsaved bool // the record changed since it was saved
	found   bool // a change beyond the overlap was found since the last probe ended
}

// timingsRecord is the record's JSON shape.
type timingsRecord struct {
	Version  int         `json:"version"`
	Lags     []lagSample `json:"lags"` // newest last
	SettleMs int64       `json:"settleMs"`
	// OverlapMs and SettleMs are the derived values in force.
	OverlapMs     int64     `json:"overlapMs"`
	Changed       time.Time `json:"changed"` // last widening or shrinking step
	Probe         time.Time `json:"probe,omitzero"`
	BeyondOverlap int64     `json:"beyondOverlap"`
	// ProbeEveryMs is the time from one probe to the next (probeEvery
	// after a probe that found a change beyond the overlap, doubled after
	// each that found none).
	ProbeEveryMs int64 `json:"probeEveryMs,omitempty"`
	// IntervalMs and IntervalSource are the pace last in force (for the
	// state report of a stopped watcher).
	IntervalMs     int64  `json:"intervalMs,omitempty"`
	IntervalSource string `json:"intervalSource,omitempty"`
}

type lagSample struct {
	At time.Time `json:"at"`
	Ms int64     `json:"ms"`
}

const timingsVersion = 1

// NewTimings loads what was measured before (a missing or unreadable
// record is nothing known) and returns the timings in force.
func NewTimings(cfg TimingsConfig) *Timings {
	t := &Timings{cfg: cfg, log: cfg.Logger}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Records != nil {
		var r timingsRecord
		found, err := cfg.Records.LoadRecord(TimingsRecord, &r)
		switch {
		case err != nil:
			t.log.Warn("the record of measured late arrivals is unreadable: settle and overlap start from their floor, a probe reads 10 minutes back after the first sweep", "record", TimingsRecord, "err", err)
		case found && r.Version == timingsVersion:
			t.rec = r
		}
	}
	t.rec.Version = timingsVersion
	t.rec.clamp()
	t.in.BeyondOverlap = t.rec.BeyondOverlap
	t.in.LastProbe = t.rec.Probe
	t.in.ProbeEvery = t.every()
	t.in.Interval = time.Duration(t.rec.IntervalMs) * time.Millisecond
	t.in.IntervalSource = t.rec.IntervalSource
	t.apply()
	return t
}

// clamp brings every value of a restored record into its range: a
// damaged or foreign record (a level of -1e9, lags of a century) must not
// size a sweep. Settle and overlap go within their floor and ceiling; lags
// within [0, OverlapCeiling] (no derived value reads more), the newest
// lagSamples; counts and the reported pace not negative. The times are
// checked against the sweeps' clock where they are used (Observe: a last
// change in the future would stop the shrinking for good; ProbeDue: a
// probe in the future is due).
func (r *timingsRecord) clamp() {
	r.SettleMs = clampMs(r.SettleMs, SettleFloor, SettleCeiling)
	r.OverlapMs = clampMs(r.OverlapMs, OverlapFloor, OverlapCeiling)
	r.Lags = r.Lags[max(len(r.Lags)-lagSamples, 0):]
	for i := range r.Lags {
		r.Lags[i].Ms = clampMs(r.Lags[i].Ms, 0, OverlapCeiling)
	}
	r.BeyondOverlap = max(r.BeyondOverlap, 0)
	r.IntervalMs = max(r.IntervalMs, 0)
	r.ProbeEveryMs = clampMs(r.ProbeEveryMs, probeEvery, probeEveryMax)
}

func clampMs(ms int64, lo, hi time.Duration) int64 {
	return min(max(ms, lo.Milliseconds()), hi.Milliseconds())
}

// apply sets the values in force from the config and the record. Called
// with mu held.
func (t *Timings) apply() {
	t.in.LateArrivals = len(t.rec.Lags)
	derived := SourceDefault
	if len(t.rec.Lags) > 0 || t.rec.SettleMs > SettleFloor.Milliseconds() || t.rec.OverlapMs > OverlapFloor.Milliseconds() {
		derived = SourceLate
	}
	t.in.Settle, t.in.SettleSource = time.Duration(t.rec.SettleMs)*time.Millisecond, derived
	if t.cfg.Settle > 0 {
		t.in.Settle, t.in.SettleSource = t.cfg.Settle, SourceExplicit
	}
	t.in.Overlap, t.in.OverlapSource = time.Duration(t.rec.OverlapMs)*time.Millisecond, derived
	if t.cfg.Overlap > 0 {
		t.in.Overlap, t.in.OverlapSource = t.cfg.Overlap, SourceExplicit
	}
}

// InForce returns the values in force.
func (t *Timings) InForce() InForce {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.in
}

// Next returns the settle and overlap of the next sweep.
func (t *Timings) Next() (settle, overlap time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.in.Settle, t.in.Overlap
}

// ProbeDue says whether the window OverlapCeiling back from the watermark
// is to be read again (the overlap is derived and the last probe is
// probeEvery ago, or none was made).
func (t *Timings) ProbeDue(now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cfg.Overlap <= 0 && t.in.Overlap < OverlapCeiling && (t.rec.Probe.IsZero() || now.Sub(t.rec.Probe) >= t.every() || now.Before(t.rec.Probe))
}

// every is the time from one probe to the next. Called with mu held.
func (t *Timings) every() time.Duration {
	return time.Duration(t.rec.ProbeEveryMs) * time.Millisecond
}

// ProbeWindow is how far below the watermark a probe starting now reads:
// probeLate plus the time between probes (10 minutes at first).
func (t *Timings) ProbeWindow() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return probeLate + t.every()
}

// SetInterval records the pace in force (Budget.Pace) for the reports.
func (t *Timings) SetInterval(d time.Duration, source string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.in.Interval, t.in.IntervalSource = d, source
	// Kept in the record for a stopped watcher's report; written with the
	// next Observe when its source changed, else with the next change of
	// settle or overlap (not for every sweep).
	t.unsaved = t.unsaved || source != t.rec.IntervalSource
	t.rec.IntervalMs, t.rec.IntervalSource = d.Milliseconds(), source
}

// Observe takes a sweep's or a probe's late arrivals: late are how far
// below the watermark each was, under the settle and overlap in force;
// probe says a probe ended (even when it failed: one that fails every
// time must not run all the time). It widens
// settle and overlap at once, shrinks them step by step, and saves the
// record when anything changed.
func (t *Timings) Observe(now time.Time, late []time.Duration, settle, overlap time.Duration, probe bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	dirty := false
	if t.rec.Changed.After(now) {
		// A step in the future (a record of a clock set back, or damaged)
		// would hold settle and overlap where they are for good.
		t.rec.Changed, dirty = now, true
	}
	inForce := t.in.Overlap
	for _, d := range late {
		lag := settle + d
		t.rec.Lags = append(t.rec.Lags, lagSample{At: now, Ms: lag.Milliseconds()})
		dirty = true
		if d > inForce {
			t.found = true
			t.rec.BeyondOverlap++
			t.in.BeyondOverlap = t.rec.BeyondOverlap
			t.log.Warn("a change arrived later than the overlap in force: a probe sweep found it (it is published); the overlap is widened",
				"late_by", d.String(), "overlap", inForce.String(), "lag", lag.String())
		}
	}
	if probe {
		t.rec.Probe = now
		t.in.LastProbe = now
		if t.found {
			t.rec.ProbeEveryMs = probeEvery.Milliseconds()
		} else {
			t.rec.ProbeEveryMs = min(2*t.rec.ProbeEveryMs, probeEveryMax.Milliseconds())
		}
		t.found = false
		t.in.ProbeEvery = t.every()
		dirty = true
	}
	// Forget what is older than a day, and beyond the last lagSamples.
	keep := t.rec.Lags[:0]
	for _, s := range t.rec.Lags {
		if now.Sub(s.At) <= lagMaxAge && !s.At.After(now.Add(time.Hour)) {
			keep = append(keep, s)
		}
	}
	if len(keep) != len(t.rec.Lags) {
		dirty = true
	}
	t.rec.Lags = keep[max(len(keep)-lagSamples, 0):]

	settleT, overlapT := targets(t.rec.Lags)
	oldS, oldO := t.rec.SettleMs, t.rec.OverlapMs
	widened := false
	if settleT > t.rec.SettleMs {
		t.rec.SettleMs, widened = settleT, true
	}
	if overlapT > t.rec.OverlapMs {
		t.rec.OverlapMs, widened = overlapT, true
	}
	switch {
	case widened:
		t.rec.Changed = now
	case now.Sub(t.rec.Changed) >= shrinkEvery && (settleT < t.rec.SettleMs || overlapT < t.rec.OverlapMs):
		t.rec.SettleMs = max(settleT, int64(float64(t.rec.SettleMs)*shrinkTo))
		t.rec.OverlapMs = max(overlapT, int64(float64(t.rec.OverlapMs)*shrinkTo))
		t.rec.Changed = now
	}
	if t.rec.SettleMs != oldS || t.rec.OverlapMs != oldO {
		dirty = true
		t.log.Info("settle and overlap follow the measured late arrivals",
			"settle", (time.Duration(t.rec.SettleMs) * time.Millisecond).String(),
			"overlap", (time.Duration(t.rec.OverlapMs) * time.Millisecond).String(),
			"late_arrivals", len(t.rec.Lags), "widened", widened,
			"pinned_settle", t.cfg.Settle > 0, "pinned_overlap", t.cfg.Overlap > 0)
	}
	t.apply()
	if (dirty || t.unsaved) && t.cfg.Records != nil {
		t.unsaved = false
		if err := t.cfg.Records.SaveRecord(TimingsRecord, t.rec); err != nil {
			t.unsaved = true
			t.log.Warn("saving the measured late arrivals failed; they are kept in memory", "err", err)
		}
	}
}

// ProbeFailed notes a probe that ended on an error: it read nothing for
// sure (its window stays owed in the read ledger, and the next probe reads
// it), so the time to the next is not doubled; it is not shortened either
// (a probe that fails every time must not run all the time).
func (t *Timings) ProbeFailed(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rec.Probe = now
	t.in.LastProbe = now
	if t.cfg.Records != nil {
		if err := t.cfg.Records.SaveRecord(TimingsRecord, t.rec); err != nil {
			t.unsaved = true
			t.log.Warn("saving the measured late arrivals failed; they are kept in memory", "err", err)
		}
	}
}

// Probing says whether probes run (the overlap is derived and below its
// ceiling): the read ledger then owes every second a read at probeLate.
func (t *Timings) Probing() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cfg.Overlap <= 0 && t.in.Overlap < OverlapCeiling
}

// targets are the settle (the lags' 90th percentile, once there are
// settleSamples of them) and overlap (twice their maximum) the lags call
// for, in milliseconds, within the bounds.
func targets(lags []lagSample) (settle, overlap int64) {
	if len(lags) == 0 {
		return SettleFloor.Milliseconds(), OverlapFloor.Milliseconds()
	}
	ms := make([]int64, len(lags))
	for i, s := range lags {
		ms[i] = s.Ms
	}
	slices.Sort(ms)
	settle = SettleFloor.Milliseconds()
	if len(ms) >= settleSamples {
		settle = clampMs(ms[int(math.Ceil(0.9*float64(len(ms))))-1], SettleFloor, SettleCeiling)
	}
	return settle, clampMs(2*ms[len(ms)-1], OverlapFloor, OverlapCeiling)
}

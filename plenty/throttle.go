package plenty

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Header prefixes of the service's three throttling limits.
const (
	PrefixLong  = "X-Plenty-Global-Long-Period"
	PrefixShort = "X-Plenty-Global-Short-Period"
	PrefixRoute = "X-Plenty-Route"
)

// Period is what one limit's headers said: <prefix>-Limit, -Calls-Left,
// -Decay (seconds until the period resets) and, on a 429, -Calls-Reset (the
// unix time at which the count resets).
type Period struct {
	Present   bool // at least one header of this limit was sent
	Limit     int
	CallsLeft int // -1 when not sent or unreadable
	Decay     time.Duration
	Reset     time.Time // zero when not sent
}

// Throttle is the typed snapshot of a response's throttling headers.
type Throttle struct {
	Long, Short, Route Period
	RetryAfter         time.Duration // Retry-After, on a 429
	ServerTime         time.Time     // the Date header; zero when absent or unparseable
	Observed           time.Time     // local clock when the response arrived
}

// ParseThrottle reads the nine X-Plenty-* headers, Retry-After, the
// -Calls-Reset headers and Date. Malformed values are ignored, never fatal.
func ParseThrottle(h http.Header, now time.Time) Throttle {
	t := Throttle{
		Long:     parsePeriod(h, PrefixLong),
		Short:    parsePeriod(h, PrefixShort),
		Route:    parsePeriod(h, PrefixRoute),
		Observed: now,
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 && secs < 1e7 {
			t.RetryAfter = time.Duration(secs * float64(time.Second))
		} else if at, err := http.ParseTime(v); err == nil {
			if d := at.Sub(serverNow(h, now)); d > 0 {
				t.RetryAfter = d
			}
		}
	}
	if d := h.Get("Date"); d != "" {
		if st, err := http.ParseTime(d); err == nil {
			t.ServerTime = st
		}
	}
	return t
}

func serverNow(h http.Header, now time.Time) time.Time {
	if st, err := http.ParseTime(h.Get("Date")); err == nil {
		return st
	}
	return now
}

func parsePeriod(h http.Header, prefix string) Period {
	p := Period{CallsLeft: -1}
	num := func(suffix string) (int64, bool) {
		v := strings.TrimSpace(h.Get(prefix + suffix))
		if v == "" {
			return 0, false
		}
		p.Present = true
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, false
		}
		return n, true
	}
	if n, ok := num("-Limit"); ok {
		p.Limit = int(min(n, 1<<31-1))
	}
	if n, ok := num("-Calls-Left"); ok {
		p.CallsLeft = int(min(n, 1<<31-1))
	}
	if n, ok := num("-Decay"); ok && n < 1e7 {
		p.Decay = time.Duration(n) * time.Second
	}
	if n, ok := num("-Calls-Reset"); ok && n < 1e11 {
		p.Reset = time.Unix(n, 0)
	}
	return p
}

// exhausted returns the period with no calls left that resets last: the
// one a 429 is about (with the short period and the day both spent, the
// wait is the day's).
func (t Throttle) exhausted() (Period, bool) {
	base := t.ServerTime
	if base.IsZero() {
		base = t.Observed
	}
	ends := func(p Period) time.Duration {
		if !p.Reset.IsZero() {
			return p.Reset.Sub(base)
		}
		return p.Decay
	}
	var worst Period
	found := false
	for _, p := range []Period{t.Short, t.Route, t.Long} {
		if p.Present && p.CallsLeft == 0 && (!found || ends(p) > ends(worst)) {
			worst, found = p, true
		}
	}
	return worst, found
}

// PacerConfig tunes the Pacer.
type PacerConfig struct {
	// Reserve is how many calls of the short and the route period are never
	// spent: when calls left fall to it, the pacer waits for the period to
	// reset. Other integrations share the limit. 0 (the default) scales it
	// with the period's limit: PeriodReserve.
	Reserve int
	// LongReserve is the same for the long (daily) period. Default 500.
	LongReserve int
	// DefaultBlock is the wait after a 429 that names no wait at all (no
	// Retry-After, no reset time, no decay). Default 20s.
	DefaultBlock time.Duration
	// OnBlock, when set, is told of every wait that starts or grows:
	// no call before until, and why (it logs the long ones). It is
	// called with the pacer's lock held: it must not call the pacer.
	OnBlock func(until time.Time, why string)
	// OnWait, when set, is told of the pending wait whenever it changes: a
	// wait starts or grows, or the pending one has passed (the zero Wait).
	// The daemon persists it (record "waits") so that a restarted process
	// is bound by it too (Restore). It is called without the pacer's lock,
	// in the order of the changes; it must not call the pacer.
	OnWait func(Wait)
	// Now and Sleep replace the clock in tests.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// Pacer spaces calls so that the service's throttling is never hit:
// proactively, from the headers of every response (calls are spread over
// what is left of each period, and a reserve that scales with the
// period's size, PeriodReserve, is never spent),
// and reactively (after a 429 no call is made before Retry-After or the
// reset time has passed). It is safe for concurrent use.
type Pacer struct {
	cfg PacerConfig

	mu        sync.Mutex
	notBefore time.Time     // no call before this moment (429, reserve reached)
	blockWhy  string        // why notBefore was set
	wait      Wait          // the wait notBefore is, as persisted
	told      bool          // OnWait was told of a wait that has not been cleared yet
	notify    sync.Mutex    // serialises OnWait calls
	spacing   time.Duration // minimum gap between two calls, from the headers
	lastCall  time.Time
	last      Throttle
	waited    time.Duration
}

// NewPacer returns a pacer with cfg's defaults filled in.
func NewPacer(cfg PacerConfig) *Pacer {
	if cfg.LongReserve <= 0 {
		cfg.LongReserve = 500
	}
	if cfg.DefaultBlock <= 0 {
		cfg.DefaultBlock = 20 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = Sleep
	}
	return &Pacer{cfg: cfg}
}

// ReserveShare is the part of a short or route period that PeriodReserve
// keeps for the shop's other integrations: 5 calls of the service's 200.
const ReserveShare = 0.025

// PeriodReserve is the calls of a short or route period of limit calls the
// pacer never spends unless told otherwise (PacerConfig.Reserve):
// ReserveShare of the limit, rounded up, and at least one. It scales with the
// period: 5 of 200, 1 of 12 or of 30 (a fixed 5 would be 42% of a 12-call
// period, left unused while changes wait).
func PeriodReserve(limit int) int {
	if limit <= 0 {
		return 1
	}
	return max(int(math.Ceil(float64(limit)*ReserveShare)), 1)
}

// Spacing is the gap the pacer keeps between two calls while a period
// that resets in decay has usable calls left (calls left less the
// reserve): the usable calls spread evenly so that the last of them falls
// before the reset (decay / (usable+1)), not at it. The calls of a period
// are spent while it lasts, none in a burst that leaves the rest of the
// period without a call: a change that waits for the next sweep finds a
// call to make in every part of the period.
func Spacing(decay time.Duration, usable int) time.Duration {
	if decay <= 0 || usable <= 0 {
		return 0
	}
	return decay / time.Duration(usable+1)
}

// reserve is the reserve the pacer keeps of a period of limit calls.
func (c PacerConfig) reserve(limit int) int {
	if c.Reserve > 0 {
		return c.Reserve
	}
	return PeriodReserve(limit)
}

// Sleep waits d or until ctx is done, whichever comes first; it returns
// ctx's error when ctx ended the wait.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Wait blocks until the next call may be made, or ctx is done. It reserves
// the slot: the caller makes its call right after.
func (p *Pacer) Wait(ctx context.Context) error {
	for {
		p.mu.Lock()
		now := p.cfg.Now()
		at := p.notBefore
		if next := p.lastCall.Add(p.spacing); next.After(at) {
			at = next
		}
		if !at.After(now) {
			p.lastCall = now
			if p.told && !p.notBefore.After(now) {
				p.told = false
				p.tell(Wait{}) // the pending wait has passed: nothing binds a restart; unlocks p.mu
				return nil
			}
			p.mu.Unlock()
			return nil
		}
		d := at.Sub(now)
		p.waited += d
		p.mu.Unlock()
		if err := p.cfg.Sleep(ctx, d); err != nil {
			return err
		}
	}
}

// Observe feeds a response's status and throttle headers to the pacer.
func (p *Pacer) Observe(status int, t Throttle) {
	p.mu.Lock()
	before := p.notBefore
	p.observe(status, t)
	if p.notBefore.Equal(before) {
		p.mu.Unlock()
		return
	}
	p.told = true
	p.tell(p.wait) // unlocks p.mu
}

// tell passes a changed wait to OnWait. Called with p.mu held, it takes
// the notify lock before it releases p.mu, so that OnWait hears the
// changes in their order, and calls OnWait without p.mu.
func (p *Pacer) tell(w Wait) {
	if p.cfg.OnWait == nil {
		p.mu.Unlock()
		return
	}
	p.notify.Lock()
	p.mu.Unlock()
	defer p.notify.Unlock()
	p.cfg.OnWait(w)
}

func (p *Pacer) observe(status int, t Throttle) {
	now := p.cfg.Now()
	p.remember(t)
	if status == http.StatusTooManyRequests {
		d, why, reset := p.blockFor429(t, now)
		reason := WaitThrottled
		if t.Long.Present && t.Long.Limit > 0 && t.Long.CallsLeft == 0 {
			reason = WaitDailyQuota
		}
		p.block(now, t, d, why, reason, reset)
	}
	p.spacing = p.proactive(now, t)
}

// remember keeps t for Last. A response that lacks a limit's headers (a 429
// names only the exhausted one) keeps what the last response said of it;
// the decisions use only what this response said.
func (p *Pacer) remember(t Throttle) {
	if !t.Long.Present {
		t.Long = p.last.Long
	}
	if !t.Short.Present {
		t.Short = p.last.Short
	}
	if !t.Route.Present {
		t.Route = p.last.Route
	}
	p.last = t
}

// block holds every call for d from now, unless a longer wait is in force.
func (p *Pacer) block(now time.Time, t Throttle, d time.Duration, why string, reason WaitReason, reset time.Time) {
	if !reset.IsZero() && !t.ServerTime.IsZero() && reset.After(t.ServerTime) {
		// Never past the period's own reset by more than a minute (a
		// Retry-After of days): as a restored wait (Remaining).
		d = min(d, min(untilReset(reset, t.ServerTime, now), maxWait)+time.Minute)
	}
	d = max(min(d, maxWait), time.Second)
	until := now.Add(d)
	if !until.After(p.notBefore) {
		return
	}
	// A wait that a second reason stretches by a little (a 429 and the
	// headers of its period) is the same wait: told once. A spent daily
	// quota names the wait whatever came first.
	same := p.notBefore.After(now) && until.Sub(p.notBefore) < time.Minute
	p.notBefore = until
	w := Wait{Until: until, Reason: reason, Why: why, Measured: now, Announced: d, Reset: reset, ServerAt: t.ServerTime}
	if same {
		w.Why = p.wait.Why
		if p.wait.Reason == WaitDailyQuota || reason != WaitDailyQuota {
			w.Reason = p.wait.Reason
		}
		if w.Reset.IsZero() {
			w.Reset, w.ServerAt = p.wait.Reset, p.wait.ServerAt
		}
	}
	p.wait = w
	if !same {
		p.blockWhy = why
		if p.cfg.OnBlock != nil {
			p.cfg.OnBlock(until, why)
		}
	}
}

// proactive keeps each period's reserve (a block until it resets) and
// returns the spacing that spreads the rest over the short periods.
func (p *Pacer) proactive(now time.Time, t Throttle) time.Duration {
	var spacing time.Duration
	for _, per := range []struct {
		Period
		reserve int
		spread  bool
		name    string
		reason  WaitReason
	}{{t.Short, p.cfg.reserve(t.Short.Limit), true, "short", WaitReserve}, {t.Route, p.cfg.reserve(t.Route.Limit), true, "route", WaitReserve}, {t.Long, p.cfg.LongReserve, false, "long", WaitDailyQuota}} {
		if !per.Present || per.Limit == 0 || per.CallsLeft < 0 {
			continue // absent, or unknown: no decision on a guess
		}
		if per.CallsLeft <= per.reserve {
			// Decay is whole seconds, rounded down by the service: wait one more.
			var reset time.Time
			if !t.ServerTime.IsZero() && per.Decay > 0 {
				reset = t.ServerTime.Add(per.Decay)
			}
			p.block(now, t, per.Decay+time.Second, fmt.Sprintf("%s period: %d calls left, the reserve of %d is kept until it resets", per.name, per.CallsLeft, per.reserve), per.reason, reset)
			continue
		}
		if per.spread && per.Decay > 0 {
			spacing = max(spacing, Spacing(per.Decay, per.CallsLeft-per.reserve))
		}
	}
	return spacing
}

// blockFor429 returns the wait a 429 asks for, why, and the exhausted
// period's reset on the service's clock (zero when it named none).
func (p *Pacer) blockFor429(t Throttle, now time.Time) (time.Duration, string, time.Time) {
	var reset time.Time
	per, exhausted := t.exhausted()
	if exhausted {
		reset = per.Reset
		if reset.IsZero() && per.Decay > 0 && !t.ServerTime.IsZero() {
			reset = t.ServerTime.Add(per.Decay)
		}
	}
	if t.RetryAfter > 0 {
		return t.RetryAfter, "429 with Retry-After", reset
	}
	if exhausted {
		if !per.Reset.IsZero() {
			// Reset is a timestamp: measured against the Date header and
			// against the local clock, the longer (a Date running ahead
			// must not shorten the wait).
			base := t.ServerTime
			if base.IsZero() {
				base = now
			}
			if d := min(untilReset(per.Reset, base, now), maxWait); d > 0 {
				return d + time.Second, "429: the period resets at its -Calls-Reset", reset
			}
		}
		if per.Decay > 0 {
			return per.Decay + time.Second, "429: the period resets after its -Decay", reset
		}
	}
	return p.cfg.DefaultBlock, "429 naming no wait", reset
}

// Last returns the throttle snapshot: the most recent response's headers,
// with each limit as last reported.
func (p *Pacer) Last() Throttle {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// NotBefore returns the moment before which no call will be made (zero when free).
func (p *Pacer) NotBefore() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.notBefore
}

// Next returns the moment the next call may go out: after any wait and
// the spacing since the last call (the zero time or a past one when it
// may go now).
func (p *Pacer) Next() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	at := p.notBefore
	if next := p.lastCall.Add(p.spacing); next.After(at) {
		at = next
	}
	return at
}

// Blocked returns the moment before which no call will be made and why
// (the zero time when no wait is pending).
func (p *Pacer) Blocked() (until time.Time, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.notBefore.After(p.cfg.Now()) {
		return time.Time{}, ""
	}
	return p.notBefore, p.blockWhy
}

// WaitReason is what a pending wait is about (the reason label of
// orderwatch_paused_until_timestamp_seconds).
type WaitReason string

// Wait reasons.
const (
	// WaitDailyQuota: the long (daily) period is spent, or down to the
	// reserve kept for the shop's other integrations: no call before it
	// resets.
	WaitDailyQuota WaitReason = "daily_quota"
	// WaitThrottled: a 429 of the short or the route period, or one that
	// names no period.
	WaitThrottled WaitReason = "throttled"
	// WaitReserve: the short or the route period is down to its reserve.
	WaitReserve WaitReason = "period_reserve"
)

// Text is how the reason reads in /readyz and the state report.
func (r WaitReason) Text() string {
	switch r {
	case WaitDailyQuota:
		return "daily quota spent"
	case WaitReserve:
		return "a short period's reserve reached"
	}
	return "throttled (429)"
}

// Wait is a pending wait the service asked for: no call before Until. It
// is what the pacer persists (record "waits"), with the times it was
// measured, so that a restarted process is bound by it exactly as this one.
type Wait struct {
	Until  time.Time  `json:"until"` // no call before (local clock)
	Reason WaitReason `json:"reason"`
	Why    string     `json:"why"`
	// Measured is when the answer that asked for it arrived (local clock),
	// Announced the wait it asked for from then: a restored wait never
	// lasts longer than that (a local clock set back meanwhile).
	Measured  time.Time     `json:"measured"`
	Announced time.Duration `json:"announcedNs"`
	// Reset is the period's reset on the service's clock (its -Calls-Reset,
	// or Date + -Decay), ServerAt the Date of that answer: a restored wait
	// never ends more than a minute after the reset.
	Reset    time.Time `json:"reset,omitzero"`
	ServerAt time.Time `json:"serverAt,omitzero"`
}

// maxWait bounds every wait the service asks for: none of its periods is
// longer than a day, so a wait past a day and a minute (a Retry-After of
// days that names no reset, a -Decay of months) is a bad header, not a
// reason to stay silent for days.
const maxWait = 24*time.Hour + time.Minute

// Remaining is how much of the wait a process must still wait at now,
// guarded against a local clock that moved since it was measured: never
// more than the service announced (less what has visibly passed), never
// more than a minute past the service's own reset time as read against its
// Date header. A local clock stepped forward shortens it; that is not
// detectable before the service answers again.
func (w Wait) Remaining(now time.Time) time.Duration {
	d := w.Until.Sub(now)
	passed := max(now.Sub(w.Measured), 0)
	d = min(d, maxWait-passed)
	if w.Announced > 0 {
		d = min(d, w.Announced-passed)
	}
	if !w.Reset.IsZero() && !w.ServerAt.IsZero() && w.Reset.After(w.ServerAt) {
		// A reset before the answer's own Date (a Date running ahead of
		// the node that counts, a reset just passed) says nothing of
		// this wait: the announced length bounds it.
		d = min(d, min(untilReset(w.Reset, w.ServerAt, w.Measured), maxWait)+time.Minute-passed)
	}
	return max(d, 0)
}

// untilReset is the time from an answer to its period's reset (a
// timestamp): measured against the answer's Date (serverAt) and against
// the local clock when it arrived (local; zero: unknown), the longer. A
// Date running ahead of the clock that counts the calls would otherwise
// shorten the wait by its lead (a 429 announcing 9 h, the first call 7 h
// later); one running behind, or a local clock behind, lengthens the bound
// only, never the wait (Retry-After, -Decay, the announced length bound
// it).
func untilReset(reset, serverAt, local time.Time) time.Duration {
	d := reset.Sub(serverAt)
	if !local.IsZero() {
		d = max(d, reset.Sub(local))
	}
	return d
}

// Pending returns the wait in force and true while one is pending.
func (p *Pacer) Pending() (Wait, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.notBefore.After(p.cfg.Now()) {
		return Wait{}, false
	}
	w := p.wait
	w.Until = p.notBefore
	return w, true
}

// Restore binds the pacer by waits a previous process persisted, each for
// what Remaining says is left of it; it returns the wait in force (false
// when none is left). It tells neither OnBlock nor OnWait: the wait is
// already known and stored.
func (p *Pacer) Restore(waits ...Wait) (Wait, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	for _, w := range waits {
		d := w.Remaining(now)
		if d <= 0 {
			continue
		}
		w.Until = now.Add(d)
		if w.Until.After(p.notBefore) {
			p.notBefore, p.blockWhy, p.wait = w.Until, w.Why, w
			p.told = true
		}
	}
	if !p.notBefore.After(now) {
		return Wait{}, false
	}
	return p.wait, true
}

// Waited returns the total time Wait has spent waiting.
func (p *Pacer) Waited() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waited
}

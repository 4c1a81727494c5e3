package plenty

import (
	"context"
	"fmt"
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

// exhausted returns the first period with no calls left: the one a 429 is about.
func (t Throttle) exhausted() (Period, bool) {
	for _, p := range []Period{t.Short, t.Route, t.Long} {
		if p.Present && p.CallsLeft == 0 {
			return p, true
		}
	}
	return Period{}, false
}

// PacerConfig tunes the Pacer.
type PacerConfig struct {
	// Reserve is how many calls of the short and the route period are never
	// spent: when calls left fall to it, the pacer waits for the period to
	// reset. Other integrations share the limit. Default 5.
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
	// Now and Sleep replace the clock in tests.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// Pacer spaces calls so that the service's throttling is never hit:
// proactively, from the headers of every response (calls are spread over
// what is left of each period, and the last Reserve calls are never spent),
// and reactively (after a 429 no call is made before Retry-After or the
// reset time has passed). It is safe for concurrent use.
type Pacer struct {
	cfg PacerConfig

	mu        sync.Mutex
	notBefore time.Time     // no call before this moment (429, reserve reached)
	blockWhy  string        // why notBefore was set
	spacing   time.Duration // minimum gap between two calls, from the headers
	lastCall  time.Time
	last      Throttle
	waited    time.Duration
}

// NewPacer returns a pacer with cfg's defaults filled in.
func NewPacer(cfg PacerConfig) *Pacer {
	if cfg.Reserve <= 0 {
		cfg.Reserve = 5
	}
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
	defer p.mu.Unlock()
	now := p.cfg.Now()
	// For Last: a response that lacks a limit's headers (a 429 names only
	// the exhausted one) keeps what the last response said of it. The
	// decisions below use only what this response said.
	merged := t
	if !merged.Long.Present {
		merged.Long = p.last.Long
	}
	if !merged.Short.Present {
		merged.Short = p.last.Short
	}
	if !merged.Route.Present {
		merged.Route = p.last.Route
	}
	p.last = merged
	block := func(d time.Duration, why string) {
		d = max(d, time.Second)
		until := now.Add(d)
		if !until.After(p.notBefore) {
			return
		}
		// A wait that a second reason stretches by a little (a 429 and the
		// headers of its period) is the same wait: told once.
		same := p.notBefore.After(now) && until.Sub(p.notBefore) < time.Minute
		p.notBefore = until
		if !same {
			p.blockWhy = why
			if p.cfg.OnBlock != nil {
				p.cfg.OnBlock(until, why)
			}
		}
	}
	if status == http.StatusTooManyRequests {
		d, why := p.blockFor429(t, now)
		block(d, why)
	}
	// Proactive: keep the reserve, and spread the rest over the period.
	var spacing time.Duration
	for _, per := range []struct {
		Period
		reserve int
		spread  bool
		name    string
	}{{t.Short, p.cfg.Reserve, true, "short"}, {t.Route, p.cfg.Reserve, true, "route"}, {t.Long, p.cfg.LongReserve, false, "long"}} {
		if !per.Present || per.Limit == 0 {
			continue
		}
		if per.CallsLeft < 0 {
			continue // unknown: no decision on a guess
		}
		if per.CallsLeft <= per.reserve {
			// Decay is whole seconds, rounded down by the service: wait one more.
			block(per.Decay+time.Second, fmt.Sprintf("%s period: %d calls left, the reserve of %d is kept until it resets", per.name, per.CallsLeft, per.reserve))
			continue
		}
		if per.spread && per.Decay > 0 {
			if s := per.Decay / time.Duration(per.CallsLeft-per.reserve); s > spacing {
				spacing = s
			}
		}
	}
	p.spacing = spacing
}

func (p *Pacer) blockFor429(t Throttle, now time.Time) (time.Duration, string) {
	if t.RetryAfter > 0 {
		return t.RetryAfter, "429 with Retry-After"
	}
	if per, ok := t.exhausted(); ok {
		if !per.Reset.IsZero() {
			// Reset is the server's clock: measure it against the Date header.
			base := t.ServerTime
			if base.IsZero() {
				base = now
			}
			if d := per.Reset.Sub(base); d > 0 {
				return d + time.Second, "429: the period resets at its -Calls-Reset"
			}
		}
		if per.Decay > 0 {
			return per.Decay + time.Second, "429: the period resets after its -Decay"
		}
	}
	return p.cfg.DefaultBlock, "429 naming no wait"
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

// Waited returns the total time Wait has spent waiting.
func (p *Pacer) Waited() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waited
}

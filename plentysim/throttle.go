package plentysim

import (
	"net/http"
	"strconv"
	"time"
)

// window is one fixed throttling period: it starts at the first call after
// the previous period has ended.
type window struct {
	start time.Time
	used  int
}

// block is the Retry-After moment the simulator gave a caller.
type block struct {
	until time.Time
	limit *limitHeaders // the limit that was exceeded
}

type throttleState struct {
	long    window             // per system
	short   map[string]*window // per user
	route   map[string]*window // per user, search route only
	blocked map[string]block   // per user
}

func newThrottleState() throttleState {
	return throttleState{
		short:   make(map[string]*window),
		route:   make(map[string]*window),
		blocked: make(map[string]block),
	}
}

// limitHeaders are the header names of one limit.
type limitHeaders struct {
	limit, left, decay, reset string
	body                      []byte // the 429 body when this limit is exceeded
}

func newLimitHeaders(prefix, message string) *limitHeaders {
	return &limitHeaders{
		limit: prefix + "-Limit",
		left:  prefix + "-Calls-Left",
		decay: prefix + "-Decay",
		reset: prefix + "-Calls-Reset",
		body:  errorBody(message, http.StatusTooManyRequests),
	}
}

var (
	longHeaders  = newLimitHeaders("X-Plenty-Global-Long-Period", "long period read limit reached")
	shortHeaders = newLimitHeaders("X-Plenty-Global-Short-Period", "short period read limit reached")
	routeHeaders = newLimitHeaders("X-Plenty-Route", "route read limit reached")
)

// rejection is a call refused by the throttle.
type rejection struct {
	body []byte
}

type period struct {
	h      *limitHeaders
	limit  int
	length time.Duration
	w      *window
}

func (p *period) reset() time.Time { return p.w.start.Add(p.length) }

// roll starts a new window at now when there is none or the last has ended.
func (p *period) roll(now time.Time) {
	if p.w.start.IsZero() || !now.Before(p.reset()) {
		*p.w = window{start: now}
	}
}

// admitLocked counts one call of the caller key (cost calls; the search
// route also against the route limit) and writes the throttle headers to h.
// It returns nil when the call is admitted, else the 429 to answer: the
// caller was still blocked by an earlier 429, or a limit would be exceeded.
// A rejected call consumes nothing.
func (s *Server) admitLocked(h http.Header, r *http.Request, key string, cost int, searchRoute bool, now time.Time) *rejection {
	s.stats.Calls++
	if a := r.Header.Get("Accept"); a != "" {
		s.stats.LastAccept = a
	}
	l := s.limits
	t := &s.throttle
	periods := make([]period, 0, 3)
	periods = append(periods,
		period{longHeaders, l.LongLimit, l.LongPeriod, &t.long},
		period{shortHeaders, l.ShortLimit, l.ShortPeriod, userWindow(t.short, key)})
	if searchRoute && l.RouteLimit > 0 {
		periods = append(periods, period{routeHeaders, l.RouteLimit, l.RoutePeriod, userWindow(t.route, key)})
	}
	for i := range periods {
		periods[i].roll(now)
	}

	if b, ok := t.blocked[key]; ok {
		if now.Before(b.until) {
			s.stats.CallsWhileBlocked++
			s.stats.Throttled429++
			writeLimitHeaders(h, periods, now)
			h.Set("Retry-After", strconv.FormatInt(ceilSeconds(b.until.Sub(now)), 10))
			h.Set(b.limit.reset, strconv.FormatInt(ceilUnix(b.until), 10))
			return &rejection{body: b.limit.body}
		}
		delete(t.blocked, key)
	}

	var worst *period
	for i := range periods {
		p := &periods[i]
		if p.w.used+cost > p.limit && (worst == nil || p.reset().After(worst.reset())) {
			worst = p
		}
	}
	if worst == nil {
		for i := range periods {
			periods[i].w.used += cost
		}
		writeLimitHeaders(h, periods, now)
		return nil
	}

	// The caller is blocked until the moment Retry-After names (whole
	// seconds, rounded up). The exceeded limit's Calls-Reset names the same
	// moment (rounded up to the second), so a client may honour either
	// header; other exceeded limits name their own reset.
	s.stats.Throttled429++
	writeLimitHeaders(h, periods, now)
	retry := max(ceilSeconds(worst.reset().Sub(now)), 1)
	until := now.Add(time.Duration(retry) * time.Second)
	for i := range periods {
		p := &periods[i]
		if p.w.used+cost > p.limit {
			h.Set(p.h.reset, strconv.FormatInt(ceilUnix(p.reset()), 10))
		}
	}
	h.Set(worst.h.reset, strconv.FormatInt(ceilUnix(until), 10))
	h.Set("Retry-After", strconv.FormatInt(retry, 10))
	t.blocked[key] = block{until: until, limit: worst.h}
	return &rejection{body: worst.h.body}
}

// ConsumeQuota counts n calls that another integration of the shop made
// as user: against that user's short-period limit and the system's
// long-period limit, as the real service counts every client of a user and
// of a system. A client sees them only in the Calls-Left headers of its
// next response, and may run into a 429 it could not foresee (a 429
// storm). Calls beyond a limit are not counted: the service refuses them.
func (s *Server) ConsumeQuota(user string, n int) {
	now := s.cfg.Now()
	s.ctl.Lock()
	defer s.ctl.Unlock()
	l := s.limits
	for _, p := range []period{
		{limit: l.LongLimit, length: l.LongPeriod, w: &s.throttle.long},
		{limit: l.ShortLimit, length: l.ShortPeriod, w: userWindow(s.throttle.short, user)},
	} {
		p.roll(now)
		p.w.used = min(p.w.used+max(n, 0), p.limit)
	}
}

func userWindow(m map[string]*window, key string) *window {
	w := m[key]
	if w == nil {
		w = &window{}
		m[key] = w
	}
	return w
}

func writeLimitHeaders(h http.Header, periods []period, now time.Time) {
	for i := range periods {
		p := &periods[i]
		h.Set(p.h.limit, strconv.Itoa(p.limit))
		h.Set(p.h.left, strconv.Itoa(max(p.limit-p.w.used, 0)))
		h.Set(p.h.decay, strconv.FormatInt(max(ceilSeconds(p.reset().Sub(now)), 0), 10))
	}
}

// ceilSeconds returns d in whole seconds, rounded up.
func ceilSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return s
}

// ceilUnix returns t as a unix timestamp, rounded up to the second.
func ceilUnix(t time.Time) int64 {
	if t.Nanosecond() > 0 {
		return t.Unix() + 1
	}
	return t.Unix()
}

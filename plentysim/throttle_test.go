package plentysim

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// headerInts reads the integer headers of a response; a missing header is -1.
func headerInts(r response, names ...string) []int {
	out := make([]int, len(names))
	for i, n := range names {
		v, err := strconv.Atoi(r.header.Get(n))
		if err != nil {
			v = -1
		}
		out[i] = v
	}
	return out
}

const (
	shortLimit = "X-Plenty-Global-Short-Period-Limit"
	shortLeft  = "X-Plenty-Global-Short-Period-Calls-Left"
	shortDecay = "X-Plenty-Global-Short-Period-Decay"
	shortReset = "X-Plenty-Global-Short-Period-Calls-Reset"
	longLimit  = "X-Plenty-Global-Long-Period-Limit"
	longLeft   = "X-Plenty-Global-Long-Period-Calls-Left"
	longDecay  = "X-Plenty-Global-Long-Period-Decay"
	routeLimit = "X-Plenty-Route-Limit"
	routeLeft  = "X-Plenty-Route-Calls-Left"
	routeDecay = "X-Plenty-Route-Decay"
)

func TestThrottleHeaders(t *testing.T) {
	h := newHarness(t, Config{Limits: Limits{ShortLimit: 10, LongLimit: 1000}})
	names := []string{shortLimit, shortLeft, shortDecay, longLimit, longLeft, longDecay, routeLimit, routeLeft, routeDecay}
	login := h.do(http.MethodPost, PathLogin, "", loginBody("demo", "demo"))
	tok := decodeTokens(t, login.body).Access
	steps := []struct {
		name    string
		advance time.Duration
		limits  *Limits
		request func() response
		want    []int
	}{
		{"login", 0, nil, func() response { return login },
			[]int{10, 9, 20, 1000, 999, 86400, -1, -1, -1}},
		{"search", 5 * time.Second, nil, func() response { return h.do(http.MethodGet, PathSearch, tok, nil) },
			[]int{10, 8, 15, 1000, 998, 86395, -1, -1, -1}},
		{"search", 500 * time.Millisecond, nil, func() response { return h.do(http.MethodGet, PathSearch, tok, nil) },
			[]int{10, 7, 15, 1000, 997, 86395, -1, -1, -1}},
		{"401 counts against the address", 0, nil, func() response { return h.do(http.MethodGet, PathSearch, "", nil) },
			[]int{10, 9, 20, 1000, 996, 86395, -1, -1, -1}},
		{"route limit on search", 0, &Limits{ShortLimit: 10, LongLimit: 1000, RouteLimit: 5, RoutePeriod: time.Minute},
			func() response { return h.do(http.MethodGet, PathSearch, tok, nil) },
			[]int{10, 6, 15, 1000, 995, 86395, 5, 4, 60}},
		{"no route headers on login", 0, nil, func() response { return h.do(http.MethodPost, PathLogin, "", loginBody("demo", "x")) },
			[]int{10, 5, 15, 1000, 994, 86395, -1, -1, -1}},
		{"short period resets", 15 * time.Second, nil, func() response { return h.do(http.MethodGet, PathSearch, tok, nil) },
			[]int{10, 9, 20, 1000, 993, 86380, 5, 3, 45}},
	}
	for _, st := range steps {
		h.clock.Advance(st.advance)
		if st.limits != nil {
			h.sim.SetLimits(*st.limits)
		}
		r := st.request()
		if got := headerInts(r, names...); !equalInts(got, st.want) {
			t.Errorf("%s: headers\n got  %v\n want %v", st.name, got, st.want)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestThrottle429(t *testing.T) {
	h := newHarness(t, Config{Limits: Limits{ShortLimit: 3}})
	t0 := h.clock.Now()
	tok := h.login()
	h.search(tok, "", nil)
	h.clock.Advance(4 * time.Second)
	h.search(tok, "", nil)

	r := h.do(http.MethodGet, PathSearch, tok, nil)
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("4th call: %d %s", r.status, r.body)
	}
	if got, want := string(r.body), string(fixture(t, "error-429-throttle.json")); got != want {
		t.Errorf("body %s, want %s", got, want)
	}
	wantReset := strconv.FormatInt(t0.Add(20*time.Second).Unix(), 10)
	if r.header.Get("Retry-After") != "16" || r.header.Get(shortReset) != wantReset ||
		r.header.Get(shortLeft) != "0" || r.header.Get(shortDecay) != "16" || r.header.Get(longLeft) != "165997" {
		t.Errorf("429 headers %v (want Retry-After 16, reset %s)", r.header, wantReset)
	}
	if st := h.sim.Stats(); st.Throttled429 != 1 || st.CallsWhileBlocked != 0 {
		t.Errorf("stats %+v", st)
	}

	// Calls before the Retry-After moment: 429 again, counted as while blocked.
	h.clock.Advance(10 * time.Second)
	for _, call := range []func() response{
		func() response { return h.do(http.MethodGet, PathSearch, tok, nil) },
		func() response { return h.do(http.MethodPost, PathLogin, "", loginBody("demo", "demo")) },
	} {
		r := call()
		if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "6" || r.header.Get(shortReset) != wantReset {
			t.Errorf("while blocked: %d %v %s", r.status, r.header, r.body)
		}
	}
	// Another caller (no token: the client address) is not blocked.
	if r := h.do(http.MethodGet, PathSearch, "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("other caller: %d", r.status)
	}
	if st := h.sim.Stats(); st.Throttled429 != 3 || st.CallsWhileBlocked != 2 {
		t.Errorf("stats %+v", st)
	}

	// At the Retry-After moment the period has reset.
	h.clock.Advance(6 * time.Second)
	r = h.do(http.MethodGet, PathSearch, tok, nil)
	if r.status != http.StatusOK || r.header.Get(shortLeft) != "2" || r.header.Get(shortDecay) != "20" {
		t.Errorf("after reset: %d %v", r.status, r.header)
	}
	if st := h.sim.Stats(); st.CallsWhileBlocked != 2 {
		t.Errorf("CallsWhileBlocked %d after waiting", st.CallsWhileBlocked)
	}
}

func TestThrottleLimits(t *testing.T) {
	tests := []struct {
		name     string
		limits   Limits
		searches int // searches admitted after the login
		message  string
		reset    string
		retry    string
	}{
		{"short", Limits{ShortLimit: 2}, 1, "short period read limit reached", shortReset, "20"},
		{"long", Limits{LongLimit: 3, LongPeriod: time.Hour}, 2, "long period read limit reached", "X-Plenty-Global-Long-Period-Calls-Reset", "3600"},
		{"route", Limits{RouteLimit: 2, RoutePeriod: 30 * time.Second}, 2, "route read limit reached", "X-Plenty-Route-Calls-Reset", "30"},
		{"search counts twice", Limits{ShortLimit: 6, SearchCost: 2}, 2, "short period read limit reached", shortReset, "20"},
		{"route and short: the later reset", Limits{ShortLimit: 2, RouteLimit: 1, RoutePeriod: 40 * time.Second}, 1, "route read limit reached", "X-Plenty-Route-Calls-Reset", "40"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{Limits: tt.limits})
			tok := h.login()
			for i := range tt.searches {
				if r := h.do(http.MethodGet, PathSearch, tok, nil); r.status != http.StatusOK {
					t.Fatalf("search %d: %d %s", i+1, r.status, r.body)
				}
			}
			r := h.do(http.MethodGet, PathSearch, tok, nil)
			want := `{"error":{"message":"` + tt.message + `","code":429}}`
			if r.status != http.StatusTooManyRequests || string(r.body) != want {
				t.Fatalf("%d %s, want 429 %s", r.status, r.body, want)
			}
			if r.header.Get(tt.reset) == "" || r.header.Get("Retry-After") != tt.retry {
				t.Errorf("headers %v, want %s and Retry-After %s", r.header, tt.reset, tt.retry)
			}
		})
	}
}

// TestRetryAfterRoundsUp: Retry-After is whole seconds rounded up, and the
// block lasts until the moment it names, even past the period's reset.
func TestRetryAfterRoundsUp(t *testing.T) {
	h := newHarness(t, Config{Limits: Limits{ShortLimit: 1}})
	t0 := h.clock.Now()
	tok := h.login()
	steps := []struct {
		advance           time.Duration
		status            int
		retryAfter, reset string
		callsWhileBlocked int
	}{
		// The period resets at t0+20; the client is told t0+20.5 (Retry-After)
		// and t0+21 (Calls-Reset).
		{4500 * time.Millisecond, http.StatusTooManyRequests, "16", strconv.FormatInt(t0.Unix()+21, 10), 0},
		{15500 * time.Millisecond, http.StatusTooManyRequests, "1", strconv.FormatInt(t0.Unix()+21, 10), 1},
		{500 * time.Millisecond, http.StatusOK, "", "", 1},
	}
	for i, st := range steps {
		h.clock.Advance(st.advance)
		r := h.do(http.MethodGet, PathSearch, tok, nil)
		if r.status != st.status || r.header.Get("Retry-After") != st.retryAfter || r.header.Get(shortReset) != st.reset {
			t.Errorf("step %d: %d Retry-After %q reset %q, want %d %q %q", i, r.status,
				r.header.Get("Retry-After"), r.header.Get(shortReset), st.status, st.retryAfter, st.reset)
		}
		if n := h.sim.Stats().CallsWhileBlocked; n != st.callsWhileBlocked {
			t.Errorf("step %d: CallsWhileBlocked %d, want %d", i, n, st.callsWhileBlocked)
		}
	}
}

// Calls of other integrations use up the user's short-period quota and
// the system's long-period quota: the next response shows fewer calls left,
// and a client that had calls left by its last response runs into a 429
// with a Retry-After until the period's end.
func TestConsumeQuota(t *testing.T) {
	h := newHarness(t, Config{Limits: Limits{ShortLimit: 10, ShortPeriod: 30 * time.Second, LongLimit: 1000}})
	tok := h.login() // 1 call
	h.sim.ConsumeQuota("demo", 4)
	r := h.do(http.MethodGet, PathSearch, tok, nil)
	if got := headerInts(r, shortLeft, longLeft); r.status != http.StatusOK || !equalInts(got, []int{4, 994}) {
		t.Fatalf("after 4 calls of others: %d, calls left (short, long) %v; want 200, [4 994]", r.status, got)
	}
	h.sim.ConsumeQuota("someone else", 5) // the system's quota only
	h.clock.Advance(10 * time.Second)
	h.sim.ConsumeQuota("demo", 100) // 100 of the long period; the short one is capped at its limit
	r = h.do(http.MethodGet, PathSearch, tok, nil)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "20" || r.header.Get(shortLeft) != "0" {
		t.Fatalf("after the quota is used up: %d, Retry-After %q, %s left; want 429, 20, 0", r.status, r.header.Get("Retry-After"), r.header.Get(shortLeft))
	}
	if st := h.sim.Stats(); st.Throttled429 != 1 || st.CallsWhileBlocked != 0 {
		t.Errorf("stats %+v", st)
	}
	h.clock.Advance(20 * time.Second) // a new short period
	h.sim.ConsumeQuota("demo", 3)
	if r := h.do(http.MethodGet, PathSearch, tok, nil); r.status != http.StatusOK || !equalInts(headerInts(r, shortLeft, longLeft), []int{6, 885}) {
		t.Errorf("in the next period: %d, calls left %v; want 200, [6 885]", r.status, headerInts(r, shortLeft, longLeft))
	}
}

package plenty_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/plentysim"
)

// clock is a shared fake clock for the simulator and the client: sleeping
// advances it, so throttling and token expiry are tested without waiting.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	c.Advance(d)
	return ctx.Err()
}

type env struct {
	sim   *plentysim.Server
	srv   *httptest.Server
	clk   *clock
	store *plenty.MemoryTokenStore
}

func newEnv(t *testing.T, cfg plentysim.Config) *env {
	t.Helper()
	clk := newClock()
	if cfg.Now == nil {
		cfg.Now = clk.Now
	}
	sim := plentysim.New(cfg)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return &env{sim: sim, srv: srv, clk: clk, store: &plenty.MemoryTokenStore{}}
}

// client returns a client on the env's clock; mod adjusts its config.
func (e *env) client(t *testing.T, mod func(*plenty.Config)) *plenty.Client {
	t.Helper()
	cfg := plenty.Config{
		BaseURL: e.srv.URL, Username: "demo", Password: "demo",
		Tokens: e.store,
		Now:    e.clk.Now,
		Pacer:  plenty.NewPacer(plenty.PacerConfig{Reserve: 1, Now: e.clk.Now, Sleep: e.clk.Sleep}),
		Retry:  plenty.RetryConfig{Initial: time.Millisecond, Max: 5 * time.Millisecond, MaxElapsed: 2 * time.Second},
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := plenty.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func search(t *testing.T, c *plenty.Client, q order.Query) *order.Page {
	t.Helper()
	p, err := c.SearchOrders(context.Background(), q)
	if err != nil {
		t.Fatalf("SearchOrders: %v", err)
	}
	return p
}

func TestTokenReused(t *testing.T) {
	e := newEnv(t, plentysim.Config{})
	e.sim.Generate(10, e.clk.Now().Add(-time.Hour), e.clk.Now())
	c := e.client(t, nil)
	for range 3 {
		if p := search(t, c, order.Query{}); p.TotalsCount != 10 {
			t.Fatalf("totalsCount %d, want 10", p.TotalsCount)
		}
	}
	// A restarted watcher (new client, same token store) reuses the session.
	search(t, e.client(t, nil), order.Query{})
	st := e.sim.Stats()
	if st.LoginCalls != 1 || st.MaxConcurrentSessions != 1 {
		t.Errorf("logins %d, max sessions %d; want 1 and 1", st.LoginCalls, st.MaxConcurrentSessions)
	}
}

func TestLoginStyles(t *testing.T) {
	for _, style := range []plentysim.LoginStyle{"snake", "camel", "both"} {
		t.Run(string(style), func(t *testing.T) {
			e := newEnv(t, plentysim.Config{LoginStyle: style})
			c := e.client(t, nil)
			if err := c.Login(context.Background()); err != nil {
				t.Fatal(err)
			}
			tok, _ := e.store.LoadToken(context.Background())
			if tok.AccessToken == "" || tok.RefreshToken == "" || !tok.ExpiresAt.Equal(e.clk.Now().Add(24*time.Hour)) {
				t.Errorf("token %+v: want access, refresh, expiry in 24h", tok)
			}
		})
	}
}

func TestReloginAfter401(t *testing.T) {
	e := newEnv(t, plentysim.Config{})
	c := e.client(t, nil)
	search(t, c, order.Query{})
	e.sim.ExpireSessions() // the service forgot the session early
	search(t, c, order.Query{})
	st := e.sim.Stats()
	if st.LoginCalls != 2 || st.Unauthorized401 != 1 || st.MaxConcurrentSessions != 1 {
		t.Errorf("logins %d, 401s %d, max sessions %d; want 2, 1, 1", st.LoginCalls, st.Unauthorized401, st.MaxConcurrentSessions)
	}
}

func TestExpiredTokenNoSecondSession(t *testing.T) {
	e := newEnv(t, plentysim.Config{TokenTTL: time.Hour, DisableRefresh: true})
	c := e.client(t, nil)
	search(t, c, order.Query{})
	e.clk.Advance(55 * time.Minute) // inside RenewBefore: refresh is refused (404)
	search(t, c, order.Query{})
	search(t, c, order.Query{})
	// login, search, refresh (404), search, search
	if st := e.sim.Stats(); st.LoginCalls != 1 || st.Calls != 5 {
		t.Fatalf("before expiry: logins %d calls %d; want 1 and 5: the token is kept while alive, a refused refresh not retried", st.LoginCalls, st.Calls)
	}
	e.clk.Advance(6 * time.Minute) // expired
	search(t, c, order.Query{})
	st := e.sim.Stats()
	if st.LoginCalls != 2 || st.Unauthorized401 != 0 || st.MaxConcurrentSessions != 1 || st.Calls != 7 {
		t.Errorf("logins %d, 401s %d, max sessions %d, calls %d; want 2, 0, 1, 7", st.LoginCalls, st.Unauthorized401, st.MaxConcurrentSessions, st.Calls)
	}
}

func TestRefreshKeepsOneSession(t *testing.T) {
	e := newEnv(t, plentysim.Config{TokenTTL: time.Hour})
	c := e.client(t, nil)
	search(t, c, order.Query{})
	for range 5 {
		e.clk.Advance(55 * time.Minute)
		search(t, c, order.Query{})
	}
	st := e.sim.Stats()
	if st.LoginCalls != 1 || st.RefreshCalls != 5 || st.MaxConcurrentSessions != 1 || st.Unauthorized401 != 0 {
		t.Errorf("logins %d refreshes %d max sessions %d 401s %d; want 1, 5, 1, 0", st.LoginCalls, st.RefreshCalls, st.MaxConcurrentSessions, st.Unauthorized401)
	}
}

func TestInvalidCredentials(t *testing.T) {
	e := newEnv(t, plentysim.Config{})
	c := e.client(t, func(c *plenty.Config) { c.Password = "wrong" })
	_, err := c.SearchOrders(context.Background(), order.Query{})
	if !errors.Is(err, plenty.ErrInvalidCredentials) {
		t.Fatalf("err = %v, want ErrInvalidCredentials", err)
	}
	if _, err := c.SearchOrders(context.Background(), order.Query{}); !errors.Is(err, plenty.ErrInvalidCredentials) {
		t.Fatalf("second call: err = %v", err)
	}
	if n := e.sim.Stats().LoginCalls; n != 1 {
		t.Errorf("%d login calls: a refused login must not be retried before the backoff", n)
	}
	e.clk.Advance(6 * time.Minute)
	_, _ = c.SearchOrders(context.Background(), order.Query{})
	if n := e.sim.Stats().LoginCalls; n != 2 {
		t.Errorf("%d login calls after the backoff, want 2", n)
	}
}

func TestSessionLimit(t *testing.T) {
	e := newEnv(t, plentysim.Config{MaxSessions: 3})
	for range 3 { // three other integrations hold the sessions
		other := e.client(t, func(c *plenty.Config) { c.Tokens = &plenty.MemoryTokenStore{} })
		if err := other.Login(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	c := e.client(t, func(c *plenty.Config) { c.Tokens = &plenty.MemoryTokenStore{} })
	for range 3 {
		_, err := c.SearchOrders(context.Background(), order.Query{})
		var apiErr *plenty.APIError
		if !errors.Is(err, plenty.ErrSessionLimit) || !errors.As(err, &apiErr) || apiErr.MaxSessions != 3 {
			t.Fatalf("err = %v, want the session limit with max 3", err)
		}
	}
	st := e.sim.Stats()
	if st.LoginCalls != 4 || st.SessionLimit429 != 1 {
		t.Errorf("logins %d, session-limit 429s %d: after one refusal the client must wait", st.LoginCalls, st.SessionLimit429)
	}
}

func TestAPIVersionHeader(t *testing.T) {
	e := newEnv(t, plentysim.Config{})
	search(t, e.client(t, func(c *plenty.Config) { c.APIVersion = 2; c.APIVendor = "plentymarkets" }), order.Query{})
	if got := e.sim.Stats().LastAccept; got != "application/x.plentymarkets.v2+json" {
		t.Errorf("Accept = %q", got)
	}
	search(t, e.client(t, nil), order.Query{})
	if got := e.sim.Stats().LastAccept; got != "application/json" {
		t.Errorf("Accept without a version = %q", got)
	}
}

func TestPaging(t *testing.T) {
	e := newEnv(t, plentysim.Config{MaxItemsPerPage: 10})
	e.sim.Generate(23, e.clk.Now().Add(-time.Hour), e.clk.Now())
	c := e.client(t, nil)
	var ids []int64
	var pages []int64
	for p, err := range c.Pages(context.Background(), order.Query{SortBy: "orderId", SortOrder: "asc", ItemsPerPage: 50}) {
		if err != nil {
			t.Fatal(err)
		}
		if p.ItemsPerPage != 10 || p.TotalsCount != 23 || p.LastPageNumber != 3 {
			t.Fatalf("envelope %+v: the capped size must be reported", p)
		}
		pages = append(pages, p.Page)
		for _, o := range p.Orders {
			ids = append(ids, o.ID)
		}
	}
	if !slices.Equal(pages, []int64{1, 2, 3}) || len(ids) != 23 || !slices.IsSorted(ids) {
		t.Errorf("pages %v, %d ids sorted=%v", pages, len(ids), slices.IsSorted(ids))
	}
}

func TestDecimalAndStringStatuses(t *testing.T) {
	for _, style := range []plentysim.StatusStyle{"number", "string", "mixed"} {
		t.Run(string(style), func(t *testing.T) {
			e := newEnv(t, plentysim.Config{StatusStyle: style})
			o := e.sim.AddOrder(plentysim.Order{StatusID: "5.10", ReferrerID: "4.01"})
			e.sim.AddOrder(plentysim.Order{StatusID: "11.1"})
			c := e.client(t, nil)
			p := search(t, c, order.Query{Filters: []order.Filter{order.Eq("statusId", order.Dec(order.MustDecimal("5.1")))}})
			if len(p.Orders) != 1 || p.Orders[0].ID != o.ID {
				t.Fatalf("statusId=5.1 found %v", p.Orders)
			}
			got := p.Orders[0]
			if !got.StatusID.Equal(order.MustDecimal("5.1")) || got.ReferrerID.Canonical() != "4.01" {
				t.Errorf("status %q referrer %q", got.StatusID, got.ReferrerID)
			}
		})
	}
}

func TestEveryOperator(t *testing.T) {
	e := newEnv(t, plentysim.Config{})
	base := e.clk.Now().Add(-10 * time.Hour)
	add := func(o plentysim.Order, created time.Duration) int64 {
		o.CreatedAt = base.Add(created)
		o.UpdatedAt = o.CreatedAt
		return e.sim.AddOrder(o).ID
	}
	a := add(plentysim.Order{TypeID: 1, StatusID: "5", ReferrerID: "1", ItemIDs: []int64{10, 11}, VariationIDs: []int64{100},
		Properties: map[int]string{3: "express"}, Relations: map[string]int64{"contact_receiver": 7}}, 0)
	b := add(plentysim.Order{TypeID: 1, StatusID: "5.1", ReferrerID: "4.01", ItemIDs: []int64{12}, VariationIDs: []int64{101},
		Properties: map[int]string{3: "standard"}, Relations: map[string]int64{"contact_receiver": 8}}, time.Hour)
	c := add(plentysim.Order{TypeID: 3, StatusID: "11.1", ReferrerID: "1", ItemIDs: []int64{10}}, 2*time.Hour)
	d := add(plentysim.Order{TypeID: 1, StatusID: "7.01", ReferrerID: "0"}, 3*time.Hour)
	all := []int64{a, b, c, d}
	dec := func(s string) order.Value { return order.Dec(order.MustDecimal(s)) }
	ts := func(h int) order.Value { return order.At(base.Add(time.Duration(h) * time.Hour)) }

	tests := []struct {
		name string
		f    order.Filter
		want []int64
	}{
		{"eq int", order.Eq("orderTypeId", order.Int(1)), []int64{a, b, d}},
		{"not int", order.Not("orderTypeId", order.Int(1)), []int64{c}},
		{"in decimal", order.In("statusId", dec("5.10"), dec("11.1")), []int64{b, c}},
		{"lt decimal", order.Lt("statusId", dec("5.1")), []int64{a}},
		{"lte decimal", order.Lte("statusId", dec("5.1")), []int64{a, b}},
		{"gt decimal", order.Gt("statusId", dec("7.01")), []int64{c}},
		{"gte decimal", order.Gte("statusId", dec("7.01")), []int64{c, d}},
		{"between decimal", order.Between("statusId", dec("5.05"), dec("7.01")), []int64{b, d}},
		{"eq referrer", order.Eq("referrerId", dec("4.01")), []int64{b}},
		{"between time", order.Between("createdAt", ts(1), ts(2)), []int64{b, c}},
		{"gt time", order.Gt("updatedAt", ts(2)), []int64{d}},
		{"lte time", order.Lte("updatedAt", ts(0)), []int64{a}},
		{"eq item", order.Eq("itemId", order.Int(10)), []int64{a, c}},
		{"in variation", order.In("itemVariationId", order.Int(101), order.Int(999)), []int64{b}},
		{"eq property", order.Eq("orderProperty_3", order.Str("express")), []int64{a}},
		{"not property", order.Not("orderProperty_3", order.Str("express")), []int64{b, c, d}},
		{"relation", order.Eq("relationReference_contact_receiver", order.Int(8)), []int64{b}},
		{"gt order id", order.Gt("orderId", order.Int(b)), []int64{c, d}},
		{"unknown filter ignored", order.Eq("orderTypID", order.Int(99)), all},
	}
	cl := e.client(t, nil)
	ids := func(p *order.Page) []int64 {
		var out []int64
		for _, o := range p.Orders {
			out = append(out, o.ID)
		}
		slices.Sort(out)
		return out
	}
	for _, tt := range tests {
		t.Run("GET "+tt.name, func(t *testing.T) {
			got := ids(search(t, cl, order.Query{Filters: []order.Filter{tt.f}}))
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
		t.Run("POST "+tt.name, func(t *testing.T) {
			got := ids(search(t, cl, order.Query{Complex: order.And(tt.f)}))
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	complexOnly := []struct {
		name string
		g    *order.Group
		want []int64
	}{
		{"nin", order.And(order.Nin("statusId", dec("5"), dec("5.1"))), []int64{c, d}},
		{"null property", order.And(order.Null("orderProperty_3")), []int64{c, d}},
		{"nn property", order.And(order.NotNull("orderProperty_3")), []int64{a, b}},
		{"or", order.Or(order.Eq("orderTypeId", order.Int(3)), order.Eq("statusId", dec("5"))), []int64{a, c}},
		{"nested", order.And(order.Eq("orderTypeId", order.Int(1)),
			order.Or(order.Eq("itemId", order.Int(12)), order.Gt("statusId", dec("7")))), []int64{b, d}},
	}
	for _, tt := range complexOnly {
		t.Run("POST "+tt.name, func(t *testing.T) {
			got := ids(search(t, cl, order.Query{Complex: tt.g}))
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	// Simple and complex filters together: both apply.
	got := ids(search(t, cl, order.Query{Filters: []order.Filter{order.Eq("orderTypeId", order.Int(1))}, Complex: order.And(order.Gte("statusId", dec("5.1")))}))
	if !slices.Equal(got, []int64{b, d}) {
		t.Errorf("simple + complex: got %v", got)
	}
}

func TestThrottleProactive(t *testing.T) {
	e := newEnv(t, plentysim.Config{Limits: plentysim.Limits{ShortLimit: 10, ShortPeriod: 20 * time.Second, RouteLimit: 8, RoutePeriod: 30 * time.Second}})
	c := e.client(t, nil)
	start := e.clk.Now()
	for range 40 {
		search(t, c, order.Query{})
	}
	st := e.sim.Stats()
	if st.Throttled429 != 0 || st.CallsWhileBlocked != 0 {
		t.Errorf("429s %d, calls while blocked %d: the pacer must stay within the limits", st.Throttled429, st.CallsWhileBlocked)
	}
	// 41 calls at 7 route calls per 30s (one kept in reserve) take at least 5 periods.
	if took := e.clk.Now().Sub(start); took < 150*time.Second {
		t.Errorf("40 searches took %v of simulated time; the limits allow no less than 150s", took)
	}
	if th := c.Throttle(); !th.Short.Present || th.Short.Limit != 10 || !th.Route.Present || th.Route.Limit != 8 || !th.Long.Present {
		t.Errorf("throttle snapshot %+v", th)
	}
}

func TestThrottleRetryAfter(t *testing.T) {
	e := newEnv(t, plentysim.Config{Limits: plentysim.Limits{ShortLimit: 5, ShortPeriod: 20 * time.Second}})
	c := e.client(t, nil)
	search(t, c, order.Query{})
	// Another integration with the same user spends the rest of the period.
	tok, _ := e.store.LoadToken(context.Background())
	for range 3 { // login + search used 2 of the 5 calls
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/rest/orders/search", nil)
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	before := e.clk.Now()
	search(t, c, order.Query{}) // meets a 429, waits Retry-After, succeeds
	st := e.sim.Stats()
	if st.Throttled429 < 1 {
		t.Fatalf("no 429 was provoked: %+v", st)
	}
	if st.CallsWhileBlocked != 0 {
		t.Errorf("%d calls while a Retry-After was pending", st.CallsWhileBlocked)
	}
	if waited := e.clk.Now().Sub(before); waited < 10*time.Second {
		t.Errorf("waited %v; the period had most of its 20s left", waited)
	}
	if c.Pacer().Waited() <= 0 {
		t.Error("the pacer's wait figure is zero")
	}
}

func TestFaults(t *testing.T) {
	tests := []struct {
		name   string
		faults plentysim.Faults
		check  func(error) bool
	}{
		{"500", plentysim.Faults{ServerErrorRate: 1}, func(err error) bool {
			var e *plenty.APIError
			return errors.As(err, &e) && e.Status == 500
		}},
		{"502 html", plentysim.Faults{HTMLRate: 1}, func(err error) bool {
			var e *plenty.APIError
			return errors.As(err, &e) && e.Status == 502 && strings.Contains(e.Body, "Bad Gateway")
		}},
		{"truncated", plentysim.Faults{TruncateRate: 1}, func(err error) bool {
			var e *order.DecodeError
			return errors.As(err, &e)
		}},
		{"garbage", plentysim.Faults{GarbageRate: 1}, func(err error) bool {
			var e *order.DecodeError
			return errors.As(err, &e)
		}},
		{"dropped", plentysim.Faults{DropRate: 1}, func(err error) bool {
			var e *plenty.APIError
			var d *order.DecodeError
			return err != nil && !errors.As(err, &e) && !errors.As(err, &d)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, plentysim.Config{Faults: tt.faults})
			e.sim.Generate(50, e.clk.Now().Add(-time.Hour), e.clk.Now())
			c := e.client(t, func(c *plenty.Config) { c.Retry.MaxElapsed = 50 * time.Millisecond })
			_, err := c.SearchOrders(context.Background(), order.Query{ItemsPerPage: 50})
			if !tt.check(err) {
				t.Fatalf("err = %v (%T)", err, err)
			}
			if !strings.Contains(err.Error(), "giving up") {
				t.Errorf("a retryable fault must be retried until the budget is spent: %v", err)
			}
			calls := e.sim.Stats().SearchCalls
			if calls < 2 {
				t.Errorf("%d search calls: a retryable fault must be retried", calls)
			}
			// Half the calls failing: retries get through.
			f := tt.faults
			f.ServerErrorRate, f.HTMLRate, f.TruncateRate, f.GarbageRate, f.DropRate = f.ServerErrorRate/2, f.HTMLRate/2, f.TruncateRate/2, f.GarbageRate/2, f.DropRate/2
			e.sim.SetFaults(f)
			c = e.client(t, func(c *plenty.Config) { c.Retry.MaxElapsed = 10 * time.Second })
			for range 5 {
				if p := search(t, c, order.Query{ItemsPerPage: 50}); len(p.Orders) != 50 {
					t.Fatalf("%d orders", len(p.Orders))
				}
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	e := newEnv(t, plentysim.Config{Faults: plentysim.Faults{Latency: 2 * time.Second}})
	c := e.client(t, func(c *plenty.Config) { c.Timeout = 20 * time.Millisecond; c.Retry.MaxElapsed = 60 * time.Millisecond })
	_, err := c.SearchOrders(context.Background(), order.Query{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline error", err)
	}
}

func TestPermanentErrors(t *testing.T) {
	e := newEnv(t, plentysim.Config{})
	c := e.client(t, nil)
	_, err := c.SearchOrders(context.Background(), order.Query{SortBy: "updatedAt"})
	var apiErr *plenty.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.Message == "" {
		t.Fatalf("err = %v, want a 400 with the server's message", err)
	}
	if n := e.sim.Stats().SearchCalls; n != 1 {
		t.Errorf("%d calls: a 400 must not be retried", n)
	}
	// Validation happens before any call.
	if _, err := c.SearchOrders(context.Background(), order.Query{Filters: []order.Filter{order.Null("orderProperty_1")}}); err == nil {
		t.Error("a complex-only operator in a simple filter must be refused")
	}
	if n := e.sim.Stats().SearchCalls; n != 1 {
		t.Errorf("an invalid query reached the service")
	}
}

func TestBadConfig(t *testing.T) {
	for name, cfg := range map[string]plenty.Config{
		"no url":      {Username: "u", Password: "p"},
		"bad scheme":  {BaseURL: "ftp://x", Username: "u", Password: "p"},
		"no password": {BaseURL: "http://x", Username: "u"},
		"bad version": {BaseURL: "http://x", Username: "u", Password: "p", APIVersion: -1},
	} {
		if _, err := plenty.New(cfg); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

// A 200 login whose body cannot be read opened a session already: the
// client must not try again (each try would open another), and neither the
// error nor the log may show the token.
func TestUnreadableLoginIsNotRetried(t *testing.T) {
	logins := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		logins++
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"access_token":"SECRET-TOKEN","expires_in":"soon"}`))
	}))
	defer srv.Close()
	var logs strings.Builder
	c, err := plenty.New(plenty.Config{BaseURL: srv.URL, Username: "u", Password: "p",
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Retry: plenty.RetryConfig{Initial: time.Millisecond, MaxElapsed: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, err = c.SearchOrders(context.Background(), order.Query{})
	}
	if logins != 1 {
		t.Errorf("%d logins, want 1 (then the login backoff)", logins)
	}
	if err == nil || strings.Contains(err.Error(), "SECRET") || strings.Contains(logs.String(), "SECRET") {
		t.Errorf("err %v / log %q: want an error that does not show the token", err, logs.String())
	}
}

// A service that refuses even a fresh session (401 on every call) must not
// make the client log in again: sessions would pile up.
func TestRepeated401HoldsLogin(t *testing.T) {
	logins := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/rest/login" {
			logins++
			w.Write([]byte(`{"access_token":"t","expires_in":86400}`))
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":{"message":"Unauthenticated.","code":401}}`))
	}))
	defer srv.Close()
	c, err := plenty.New(plenty.Config{BaseURL: srv.URL, Username: "u", Password: "p"})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := c.SearchOrders(context.Background(), order.Query{}); !errors.Is(err, plenty.ErrUnauthorized) {
			t.Fatalf("err = %v, want ErrUnauthorized", err)
		}
	}
	if logins != 1 {
		t.Errorf("%d logins for 5 refused calls, want 1 (a fresh token refused is tried again after a wait, not replaced by another login)", logins)
	}
}

// sweepUntilServed calls SearchOrders the way the poller's sweeps do: after
// a failure the next sweep comes later (a second), and while logins are
// held back the fake clock is moved to the end of the hold. It returns the
// fake time it took.
func sweepUntilServed(t *testing.T, e *env, c *plenty.Client) time.Duration {
	t.Helper()
	start := e.clk.Now()
	for range 100 {
		_, err := c.SearchOrders(context.Background(), order.Query{})
		if err == nil {
			return e.clk.Now().Sub(start)
		}
		var held *plenty.LoginHeldError
		if errors.As(err, &held) && held.Until.After(e.clk.Now()) {
			e.clk.Advance(held.Until.Sub(e.clk.Now()))
			continue
		}
		e.clk.Advance(time.Second)
	}
	t.Fatalf("no search served after 100 sweeps; sim %+v", e.sim.Stats())
	return 0
}

// Logins whose answers are lost after the service opened the session (the
// body cut off, the connection dropped mid-body, no answer before the
// timeout, a 500) must not pile up sessions: the first three logins are
// answered that way, the shop allows 3 sessions, and sessions live 30 s.
// The client spaces its logins, never holds the whole limit with sessions
// it may have opened, and is served once a login works.
func TestLostLoginAnswersDoNotPileUpSessions(t *testing.T) {
	for _, kind := range []plentysim.LoginFault{plentysim.LoginCut, plentysim.LoginDrop, plentysim.LoginHang, plentysim.LoginServerError} {
		t.Run(string(kind), func(t *testing.T) {
			e := newEnv(t, plentysim.Config{TokenTTL: 30 * time.Second, MaxSessions: 3})
			e.sim.Generate(10, e.clk.Now().Add(-time.Hour), e.clk.Now())
			if err := e.sim.FailLogins(3, kind); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			results := map[plenty.LoginResult]int{}
			c := e.client(t, func(c *plenty.Config) {
				c.Timeout = 100 * time.Millisecond // LoginHang: the answer never comes
				c.OnLogin = func(r plenty.LoginResult) { mu.Lock(); results[r]++; mu.Unlock() }
			})
			took := sweepUntilServed(t, e, c)
			st := e.sim.Stats()
			if st.SessionLimit429 != 0 || st.LoginCalls > 5 || st.MaxConcurrentSessions >= 3 {
				t.Errorf("%d session-limit 429s, %d logins, %d sessions at once: want 0, at most 5, and never the shop's 3", st.SessionLimit429, st.LoginCalls, st.MaxConcurrentSessions)
			}
			mu.Lock()
			if results[plenty.LoginAmbiguous] != 3 || results[plenty.LoginOK] != 1 {
				t.Errorf("login results %v: want 3 ambiguous, 1 ok", results)
			}
			mu.Unlock()
			switch kind {
			case plentysim.LoginCut, plentysim.LoginDrop:
				// The part of the answer that arrived says expires_in 30.
				if took > 2*time.Minute {
					t.Errorf("served after %v: the lost answers said their sessions end after 30 s", took)
				}
			default:
				// Nothing says when those sessions end: assumed a day.
				if took < 24*time.Hour {
					t.Errorf("served after %v: two sessions of unknown lifetime may exist; the third login must wait for the first to end", took)
				}
			}
		})
	}
}

// The limit the service names (max_current_sessions in the login answer)
// replaces the default: with a limit of 2, one session that a lost answer
// may have opened is as many as the client may hold.
func TestLearnedSessionLimit(t *testing.T) {
	e := newEnv(t, plentysim.Config{TokenTTL: 30 * time.Second, MaxSessions: 2, LoginStyle: plentysim.LoginBoth})
	c := e.client(t, nil)
	search(t, c, order.Query{})
	e.sim.ExpireSessions()
	if err := e.sim.FailLogins(1, plentysim.LoginDrop); err != nil {
		t.Fatal(err)
	}
	_, err := c.SearchOrders(context.Background(), order.Query{}) // 401, a login whose answer is lost
	if !errors.Is(err, plenty.ErrAnswerLost) {
		t.Fatalf("err = %v, want ErrAnswerLost", err)
	}
	e.clk.Advance(10 * time.Second) // past the spacing
	_, err = c.SearchOrders(context.Background(), order.Query{})
	var held *plenty.LoginHeldError
	if !errors.As(err, &held) || held.Until.Before(e.clk.Now().Add(15*time.Second)) {
		t.Fatalf("err = %v: want logins held until the unsure session has ended (~20 s from now)", err)
	}
	sweepUntilServed(t, e, c)
	if st := e.sim.Stats(); st.MaxConcurrentSessions != 1 || st.SessionLimit429 != 0 || st.LoginCalls != 3 {
		t.Errorf("stats %+v: want one session at a time, no 429, 3 logins", st)
	}
}

// Sessions shorter than RenewBefore are renewed at half their lifetime, not
// before every call.
func TestShortSessionsRenewedAtHalfLife(t *testing.T) {
	e := newEnv(t, plentysim.Config{TokenTTL: 4 * time.Minute})
	c := e.client(t, nil)
	search(t, c, order.Query{})
	for range 20 {
		e.clk.Advance(10 * time.Second)
		search(t, c, order.Query{})
	}
	// 200 s of calls every 10 s: the session (240 s) is renewed once it is
	// past half its life (after 120 s), and the renewed one is fresh again.
	st := e.sim.Stats()
	if st.LoginCalls != 1 || st.RefreshCalls != 1 || st.Unauthorized401 != 0 {
		t.Errorf("logins %d refreshes %d 401s %d for 21 searches; want 1, 1, 0", st.LoginCalls, st.RefreshCalls, st.Unauthorized401)
	}
}

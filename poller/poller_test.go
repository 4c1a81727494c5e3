package poller_test

import (
	"cmp"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/state"
)

// clock is the fake clock shared by the simulator, the client and the
// poller: the service's time moves only when a test moves it.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

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
	t      *testing.T
	clk    *clock
	sim    *plentysim.Server
	srv    *httptest.Server
	client *plenty.Client
	store  *state.Store
	poll   *poller.Poller
	cfg    poller.Config
}

var t0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

func newEnv(t *testing.T, simCfg plentysim.Config, cfg poller.Config) *env {
	t.Helper()
	return newEnvAhead(t, simCfg, cfg, 0)
}

// newEnvAhead is newEnv with the service's clock ahead of the local one
// by ahead (behind when negative): its stamps and its Date.
func newEnvAhead(t *testing.T, simCfg plentysim.Config, cfg poller.Config, ahead time.Duration) *env {
	t.Helper()
	clk := &clock{t: t0}
	simCfg.Now = func() time.Time { return clk.Now().Add(ahead) }
	if simCfg.Seed == 0 {
		simCfg.Seed = 7
	}
	e := &env{t: t, clk: clk, sim: plentysim.New(simCfg)}
	e.srv = httptest.NewServer(e.sim)
	t.Cleanup(e.srv.Close)
	var err error
	e.store, err = state.Open(filepath.Join(t.TempDir(), "state.db"), state.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.store.Close() })
	e.client = e.newClient(e.srv.URL)
	if cfg.StartFrom.IsZero() {
		cfg.StartFrom = t0.Add(-30 * 24 * time.Hour)
	}
	if cfg.Settle == 0 {
		cfg.Settle = 5 * time.Second
	}
	if cfg.Overlap == 0 {
		cfg.Overlap = 30 * time.Second
	}
	cfg.Now, cfg.Sleep, cfg.Source = clk.Now, clk.Sleep, "test"
	e.cfg = cfg
	e.poll, err = poller.New(e.client, e.store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) newClient(url string) *plenty.Client {
	c, err := plenty.New(plenty.Config{
		BaseURL: url, Username: "demo", Password: "demo", Tokens: e.store, Now: e.clk.Now,
		Pacer: plenty.NewPacer(plenty.PacerConfig{Reserve: 1, Now: e.clk.Now, Sleep: e.clk.Sleep}),
		Retry: plenty.RetryConfig{Initial: time.Millisecond, Max: 5 * time.Millisecond, MaxElapsed: 2 * time.Second},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// restartFailFast is a new process on the same state file: a client
// that gives up on a failing call at once (its retries are on the wall
// clock) and a poller with cfg.
func (e *env) restartFailFast(cfg poller.Config) {
	e.t.Helper()
	var err error
	e.client, err = plenty.New(plenty.Config{
		BaseURL: e.srv.URL, Username: "demo", Password: "demo", Tokens: e.store, Now: e.clk.Now,
		Pacer: plenty.NewPacer(plenty.PacerConfig{Reserve: 1, Now: e.clk.Now, Sleep: e.clk.Sleep}),
		Retry: plenty.RetryConfig{Initial: time.Nanosecond, Max: time.Nanosecond, MaxElapsed: time.Nanosecond},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if e.poll, err = poller.New(e.client, e.store, cfg); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) sweep() poller.Stats {
	e.t.Helper()
	st, err := e.poll.Sweep(context.Background())
	if err != nil {
		e.t.Fatalf("sweep: %v", err)
	}
	return st
}

// events reads the whole outbox as decoded CloudEvents.
func (e *env) events() []cloudEvent {
	e.t.Helper()
	entries, err := e.store.Outbox(0, 1<<30)
	if err != nil {
		e.t.Fatal(err)
	}
	out := make([]cloudEvent, len(entries))
	for i, en := range entries {
		if err := json.Unmarshal(en.Payload, &out[i]); err != nil {
			e.t.Fatalf("outbox entry %d: %v", en.Seq, err)
		}
		if out[i].ID != en.ID {
			e.t.Fatalf("outbox id %s, payload id %s", en.ID, out[i].ID)
		}
		out[i].Subject = en.Subject
	}
	return out
}

type cloudEvent struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Subject string
	Data    struct {
		OrderID int64           `json:"orderId"`
		Before  *trackedState   `json:"before"`
		After   trackedState    `json:"after"`
		Order   json.RawMessage `json:"order"`
	} `json:"data"`
}

type trackedState struct {
	StatusID   json.Number `json:"statusId"`
	LockStatus string      `json:"lockStatus"`
	UpdatedAt  string      `json:"updatedAt"`
}

// snapshot returns the tracked state of every order the simulator has.
func (e *env) snapshot() map[int64]*diff.State {
	e.t.Helper()
	orders := e.sim.Orders()
	ids := make([]int64, len(orders))
	for i, o := range orders {
		ids[i] = o.ID
	}
	got := make([]*diff.State, len(ids))
	if err := e.store.Lookup(ids, got); err != nil {
		e.t.Fatal(err)
	}
	m := make(map[int64]*diff.State, len(ids))
	for i, id := range ids {
		m[id] = got[i]
	}
	return m
}

// assertSnapshotMatches checks that the snapshot holds every order's true
// final status and lock.
func (e *env) assertSnapshotMatches() {
	e.t.Helper()
	snap := e.snapshot()
	for _, o := range e.sim.Orders() {
		s := snap[o.ID]
		if s == nil {
			e.t.Errorf("order %d missing from the snapshot", o.ID)
			continue
		}
		if !s.StatusID.Equal(order.MustDecimal(o.StatusID)) || s.LockStatus != o.LockStatus || !s.UpdatedAt.Equal(o.UpdatedAt) {
			e.t.Errorf("order %d: snapshot status %s lock %s updated %v; true %s %s %v", o.ID, s.StatusID, s.LockStatus, s.UpdatedAt.Time, o.StatusID, o.LockStatus, o.UpdatedAt)
		}
	}
}

// quiesce lets the settle delay pass and sweeps until nothing is left.
func (e *env) quiesce() {
	e.t.Helper()
	e.sim.SetBeforeSearch(nil)
	e.clk.Advance(e.cfg.Settle + time.Second)
	e.sweep()
}

func TestBaselineIsSilentAndComplete(t *testing.T) {
	e := newEnv(t, plentysim.Config{MaxItemsPerPage: 50}, poller.Config{ItemsPerPage: 50, SlicePages: 2})
	e.sim.Generate(1000, t0.Add(-20*24*time.Hour), t0.Add(-time.Minute))
	st := e.sweep()
	if n := len(e.events()); n != 0 {
		t.Errorf("the baseline emitted %d events; it records silently by default", n)
	}
	if st.Slices < 10 || st.Orders < 1000 {
		t.Errorf("baseline of 1000 orders in slices of at most 100: %d slices, %d orders read", st.Slices, st.Orders)
	}
	// The baseline point is the Date minus settle; the watermark stays
	// below the newest stamp served minus settle (the stamps vouch for it).
	var newest time.Time
	for _, o := range e.sim.Orders() {
		if o.UpdatedAt.After(newest) {
			newest = o.UpdatedAt
		}
	}
	if want := newest.Add(-5 * time.Second).Truncate(time.Second); !st.Watermark.Equal(want) || !st.Baseline {
		t.Errorf("watermark %v baseline %v, want %v", st.Watermark, st.Baseline, want)
	}
	e.assertSnapshotMatches()
	meta, _ := e.store.Meta()
	if !meta.BaselineDone || !meta.Baseline.Equal(t0.Add(-5*time.Second)) {
		t.Errorf("meta %+v", meta)
	}
}

func TestBaselineEvents(t *testing.T) {
	e := newEnv(t, plentysim.Config{}, poller.Config{EmitBaseline: true})
	e.sim.Generate(30, t0.Add(-2*time.Hour), t0.Add(-time.Minute))
	e.sweep()
	evs := e.events()
	if len(evs) != 30 {
		t.Fatalf("%d events, want 30", len(evs))
	}
	for _, ev := range evs {
		if ev.Type != string(diff.Discovered) {
			t.Errorf("baseline event type %s, want order.discovered (created before the baseline point)", ev.Type)
		}
	}
}

func TestChangesBecomeEvents(t *testing.T) {
	e := newEnv(t, plentysim.Config{}, poller.Config{})
	e.sim.Generate(100, t0.Add(-5*24*time.Hour), t0.Add(-time.Hour))
	old := e.sim.AddOrder(plentysim.Order{CreatedAt: t0.Add(-60 * 24 * time.Hour), UpdatedAt: t0.Add(-59 * 24 * time.Hour)}) // before StartFrom
	e.sweep()
	ids := e.sim.Orders()
	e.clk.Advance(time.Minute)
	if _, err := e.sim.SetStatus(ids[3].ID, "7.01"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sim.SetLock(ids[4].ID, "permanentlyLocked"); err != nil {
		t.Fatal(err)
	}
	created := e.sim.AddOrder(plentysim.Order{StatusID: "3"})
	if _, err := e.sim.SetStatus(old.ID, "8"); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(10 * time.Second)
	e.sweep()
	types := map[string]int64{}
	for _, ev := range e.events() {
		types[ev.Type] = ev.Data.OrderID
		if ev.Type == string(diff.StatusChanged) && ev.Subject != "orders.status_changed."+statusToken(ids[3].StatusID)+".7_01."+itoa(ids[3].ID) {
			t.Errorf("subject %s", ev.Subject)
		}
	}
	want := map[string]int64{string(diff.StatusChanged): ids[3].ID, string(diff.LockChanged): ids[4].ID, string(diff.Created): created.ID, string(diff.Discovered): old.ID}
	if len(types) != len(want) {
		t.Errorf("event types %v, want %v", types, want)
	}
	for typ, id := range want {
		if types[typ] != id {
			t.Errorf("%s for order %d, want %d", typ, types[typ], id)
		}
	}
	// The same changes seen again (overlap) make no new events.
	n := len(e.events())
	e.clk.Advance(5 * time.Second)
	e.sweep()
	if len(e.events()) != n {
		t.Errorf("a re-read of unchanged orders made %d new events", len(e.events())-n)
	}
}

func statusToken(s string) string { return order.MustDecimal(s).SubjectToken() }
func itoa(n int64) string         { return order.DecimalFromInt(n).String() }

func TestQuietSweepCostsTheOptimum(t *testing.T) {
	e := newEnv(t, plentysim.Config{MaxItemsPerPage: 20}, poller.Config{ItemsPerPage: 20, Overlap: time.Minute})
	e.sim.Generate(300, t0.Add(-24*time.Hour), t0.Add(-2*time.Hour))
	e.sweep()
	// 45 orders changed within the last minute, then nothing.
	e.clk.Advance(time.Hour)
	for i, o := range e.sim.Orders()[:45] {
		if i%15 == 0 {
			e.clk.Advance(time.Second)
		}
		if _, err := e.sim.Touch(o.ID); err != nil {
			t.Fatal(err)
		}
	}
	e.clk.Advance(10 * time.Second)
	e.sweep() // reads the 45
	e.clk.Advance(20 * time.Second)
	before := e.sim.Stats().SearchCalls
	st := e.sweep() // quiet: the overlap still holds the 45 orders
	calls := e.sim.Stats().SearchCalls - before
	if calls != 3 || st.Calls != 3 { // ceil(45/20)
		t.Errorf("quiet sweep over 45 orders at 20 per page: %d calls (poller counted %d), optimum 3", calls, st.Calls)
	}
	e.clk.Advance(2 * time.Minute)
	e.sweep() // the window [watermark - overlap, now - settle] passes the changes
	e.clk.Advance(30 * time.Second)
	before = e.sim.Stats().SearchCalls
	e.sweep()
	if calls := e.sim.Stats().SearchCalls - before; calls != 1 {
		t.Errorf("idle sweep: %d calls, want 1", calls)
	}
}

// TestNoMissWhileMutatingBetweenPages is the proof of the sweep: orders
// change between the page requests of every scan, and still every order's
// final state is recorded and every event is a true transition, emitted once.
// A naive offset pager, run against the same mutations, misses changes.
func TestNoMissWhileMutatingBetweenPages(t *testing.T) {
	for _, keyset := range []poller.KeysetMode{poller.KeysetOff, poller.KeysetOn, poller.KeysetAuto} {
		t.Run("keyset="+string(keyset), func(t *testing.T) {
			e := newEnv(t, plentysim.Config{MaxItemsPerPage: 25}, poller.Config{ItemsPerPage: 25, SlicePages: 3, Keyset: keyset, Overlap: time.Second})
			e.sim.Generate(600, t0.Add(-3*24*time.Hour), t0.Add(-time.Minute))
			e.sweep()
			rng := rand.New(rand.NewPCG(1, 2))
			mutateBetweenPages(e.sim, e.clk, rng)
			rescans := 0
			for range 30 {
				e.clk.Advance(3 * time.Second)
				e.sim.MutateRandom(60)
				st, err := e.poll.Sweep(context.Background())
				if err != nil {
					t.Logf("sweep: %v (retried by the next one)", err)
				}
				rescans += st.Rescans
			}
			if keyset == poller.KeysetOff && rescans == 0 {
				t.Error("no scan failed verification: the mutations did not reach the sweep")
			}
			e.quiesce()
			e.assertSnapshotMatches()
			checkEvents(t, e.sim, e.events())
		})
	}
}

// mutateBetweenPages changes a low and a high order id, a second apart,
// before every search request: the low one moves onto a page already read.
func mutateBetweenPages(sim *plentysim.Server, clk *clock, rng *rand.Rand) {
	var mu sync.Mutex
	sim.SetBeforeSearch(func(r *http.Request, page int) {
		mu.Lock()
		defer mu.Unlock()
		// The orders of the window being scanned: the most recently updated
		// before the settle delay, in id order.
		orders := sim.Orders()
		slices.SortFunc(orders, func(a, b plentysim.Order) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
		cut := clk.Now().Add(-5 * time.Second)
		for len(orders) > 0 && orders[0].UpdatedAt.After(cut) {
			orders = orders[1:]
		}
		orders = orders[:min(len(orders), 80)]
		slices.SortFunc(orders, func(a, b plentysim.Order) int { return cmp.Compare(a.ID, b.ID) })
		low := orders[rng.IntN(len(orders)/4)]
		high := orders[len(orders)-1-rng.IntN(len(orders)/4)]
		statuses := []string{"4", "5", "5.1", "6", "7.01", "8", "11.1"}
		_, _ = sim.SetStatus(low.ID, statuses[rng.IntN(len(statuses))])
		clk.Advance(time.Second)
		_, _ = sim.SetLock(high.ID, []string{"unlocked", "permanentlyLocked"}[rng.IntN(2)])
	})
}

// checkEvents verifies the event stream against the simulator's history:
// no id twice; per order, each status event starts where the previous one
// ended, shows a status the order really had, and the last one ends at the
// order's final status.
func checkEvents(t *testing.T, sim *plentysim.Server, evs []cloudEvent) {
	t.Helper()
	seen := map[string]bool{}
	had := map[int64]map[string]bool{} // statuses each order ever had
	for _, o := range sim.Orders() {
		had[o.ID] = map[string]bool{}
	}
	for _, ch := range sim.History() {
		if ch.Kind == "status" {
			had[ch.OrderID][order.MustDecimal(ch.From).Canonical()] = true
			had[ch.OrderID][order.MustDecimal(ch.To).Canonical()] = true
		}
	}
	last := map[int64]string{}
	for _, ev := range evs {
		if seen[ev.ID] {
			t.Errorf("event id %s twice", ev.ID)
		}
		seen[ev.ID] = true
		if ev.Type != string(diff.StatusChanged) {
			continue
		}
		from := order.MustDecimal(ev.Data.Before.StatusID.String()).Canonical()
		to := order.MustDecimal(ev.Data.After.StatusID.String()).Canonical()
		id := ev.Data.OrderID
		if prev, ok := last[id]; ok && prev != from {
			t.Errorf("order %d: event from %s, but the previous event ended at %s", id, from, prev)
		}
		if !had[id][to] || !had[id][from] {
			t.Errorf("order %d: transition %s -> %s shows a status the order never had", id, from, to)
		}
		last[id] = to
	}
	changed := 0
	for _, o := range sim.Orders() {
		if to, ok := last[o.ID]; ok {
			changed++
			if to != order.MustDecimal(o.StatusID).Canonical() {
				t.Errorf("order %d: last event ends at %s, the order is at %s", o.ID, to, o.StatusID)
			}
		}
	}
	if changed == 0 {
		t.Error("no status changes were seen at all")
	}
	t.Logf("%d events, %d orders with status events", len(evs), changed)
}

// naivePager is the obvious poller that DESIGN.md warns about: updatedAt >=
// the largest updatedAt seen, paged by offset. It is here to show that the
// test's mutations do make a poller miss changes.
func naivePager(t *testing.T, c *plenty.Client, since time.Time, snap map[int64]string) time.Time {
	t.Helper()
	maxSeen := since
	for page := 1; ; page++ {
		p, err := c.SearchOrders(context.Background(), order.Query{
			Filters: []order.Filter{order.Gte("updatedAt", order.At(since))},
			SortBy:  "orderId", SortOrder: "asc", Page: page, ItemsPerPage: 5,
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range p.Orders {
			snap[o.ID] = o.StatusID.Canonical() + "/" + o.LockStatus
			if o.UpdatedAt.After(maxSeen) {
				maxSeen = o.UpdatedAt.Time
			}
		}
		if p.IsLastPage || len(p.Orders) == 0 {
			return maxSeen
		}
	}
}

func TestNaivePagerMisses(t *testing.T) {
	e := newEnv(t, plentysim.Config{MaxItemsPerPage: 25}, poller.Config{})
	e.sim.Generate(600, t0.Add(-3*24*time.Hour), t0.Add(-time.Minute))
	snap := map[int64]string{}
	since := naivePager(t, e.client, t0.Add(-30*24*time.Hour), snap)
	mutateBetweenPages(e.sim, e.clk, rand.New(rand.NewPCG(1, 2)))
	for range 30 {
		e.clk.Advance(3 * time.Second)
		e.sim.MutateRandom(10)
		since = naivePager(t, e.client, since, snap)
	}
	e.sim.SetBeforeSearch(nil)
	e.clk.Advance(time.Minute)
	naivePager(t, e.client, since, snap)
	missed := 0
	for _, o := range e.sim.Orders() {
		if snap[o.ID] != order.MustDecimal(o.StatusID).Canonical()+"/"+o.LockStatus {
			missed++
		}
	}
	if missed == 0 {
		t.Fatal("the naive pager missed nothing: the mutations do not exercise the sweep's verification")
	}
	t.Logf("the naive pager ended with %d of 600 orders in a wrong state", missed)
}

// TestFirstSyncCallCost: a first sync of a large, busy shop costs close to
// the pages it must read, not a probe per handful of orders.
func TestFirstSyncCallCost(t *testing.T) {
	e := newEnv(t, plentysim.Config{Limits: plentysim.Limits{ShortLimit: 1 << 30, LongLimit: 1 << 30}}, poller.Config{})
	e.sim.Generate(20000, t0.Add(-29*24*time.Hour), t0.Add(-time.Minute))
	st := e.sweep()
	optimum := 20000 / 250
	t.Logf("first sync of 20,000 orders: %d calls in %d slices (pages alone: %d)", st.Calls, st.Slices, optimum)
	if st.Calls > optimum*3/2 {
		t.Errorf("%d calls, more than 1.5x the %d pages", st.Calls, optimum)
	}
	e.assertSnapshotMatches()
}

// TestLateCommitAfterBaseline: an order that becomes visible late, with an
// updatedAt just before the baseline point, is first seen by the overlap of
// the next sweep: it must be announced (order.discovered), not recorded
// silently as if it were part of the baseline.
func TestLateCommitAfterBaseline(t *testing.T) {
	e := newEnv(t, plentysim.Config{}, poller.Config{})
	e.sim.Generate(20, t0.Add(-24*time.Hour), t0.Add(-time.Hour))
	e.sweep() // baseline up to t0 - settle
	late := e.sim.AddOrder(plentysim.Order{CreatedAt: t0.Add(-2 * time.Hour), UpdatedAt: t0.Add(-10 * time.Second)})
	e.clk.Advance(5 * time.Second)
	e.sweep()
	evs := e.events()
	if len(evs) != 1 || evs[0].Type != string(diff.Discovered) || evs[0].Data.OrderID != late.ID {
		t.Fatalf("events %+v, want one order.discovered for %d", evs, late.ID)
	}
}

package poller_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/state"
)

// quarantined reads the quarantine of the env's state file.
func (e *env) quarantined() []state.Quarantined {
	e.t.Helper()
	qs, err := e.store.Quarantine()
	if err != nil {
		e.t.Fatal(err)
	}
	return qs
}

// quarantineOne makes the entry of the order at index i undecodable,
// changes its status to status a minute later and sweeps: the order is
// quarantined with a change the sweeps could not read.
func (e *env) quarantineOne(i int, status string) (plentysim.Order, poller.Stats) {
	e.t.Helper()
	victim := e.sim.Orders()[i]
	if victim.StatusID == status {
		e.t.Fatalf("order %d has status %s already: pick another", victim.ID, status)
	}
	e.clk.Advance(time.Minute)
	if err := e.sim.Corrupt(victim.ID, plentysim.CorruptStatus); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.sim.SetStatus(victim.ID, status); err != nil {
		e.t.Fatal(err)
	}
	e.clk.Advance(10 * time.Second)
	return victim, e.sweep()
}

// serveVia puts h in front of the simulator (a service with other habits)
// and makes a new client and poller for it.
func (e *env) serveVia(h http.Handler) {
	e.t.Helper()
	srv := httptest.NewServer(h)
	e.t.Cleanup(srv.Close)
	e.client = e.newClient(srv.URL)
	var err error
	if e.poll, err = poller.New(e.client, e.store, e.cfg); err != nil {
		e.t.Fatal(err)
	}
}

// eventsOf returns the events of one order in the outbox.
func (e *env) eventsOf(id int64) []cloudEvent {
	var out []cloudEvent
	for _, ev := range e.events() {
		if ev.Data.OrderID == id {
			out = append(out, ev)
		}
	}
	return out
}

// TestQuarantineLetsTheOthersFlow: one undecodable order holds back only
// itself. The watermark passes it, every other change is published sweep
// after sweep, the order is retried by id (a bounded number of calls, not a
// growing window), and once its entry decodes its change is published with
// the state it had before the quarantine as before.
func TestQuarantineLetsTheOthersFlow(t *testing.T) {
	var logs bytes.Buffer
	e := newEnv(t, plentysim.Config{}, poller.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	e.sim.Generate(200, t0.Add(-time.Hour), t0.Add(-time.Minute))
	e.sweep()
	orders := e.sim.Orders()
	victim := orders[40]
	before := victim.StatusID
	if before == "11.1" {
		t.Fatal("pick a victim whose status is not 11.1")
	}

	e.clk.Advance(time.Minute)
	if err := e.sim.Corrupt(victim.ID, plentysim.CorruptStatus); err != nil {
		t.Fatal(err)
	}
	e.sim.SetStatus(victim.ID, "11.1")
	changedAt, _ := e.sim.Order(victim.ID)
	e.clk.Advance(10 * time.Second)
	st := e.sweep()
	if st.BadEntries != 1 || st.QuarantineEntered != 1 {
		t.Errorf("BadEntries %d, QuarantineEntered %d; want 1 and 1", st.BadEntries, st.QuarantineEntered)
	}
	qs := e.quarantined()
	if len(qs) != 1 || qs[0].OrderID != victim.ID || qs[0].Attempts != 1 || !strings.Contains(qs[0].Reason, "status") ||
		!strings.Contains(qs[0].Excerpt, `"statusId":{`) || qs[0].UpdatedAt == "" || qs[0].FirstSeen.IsZero() {
		t.Fatalf("quarantine = %+v", qs)
	}
	if !strings.Contains(logs.String(), "order entered quarantine") {
		t.Errorf("no log line for the order entering the quarantine:\n%s", logs.String())
	}

	// Ten minutes of traffic: every other change is published in its sweep.
	want := 0
	searches := e.sim.Stats().SearchCalls
	sweeps, retries := 0, 0
	for i := range 20 {
		e.clk.Advance(30 * time.Second)
		o := orders[(i*7+3)%len(orders)]
		if o.ID == victim.ID {
			continue
		}
		if _, err := e.sim.SetStatus(o.ID, "9"); err != nil {
			t.Fatal(err)
		}
		e.clk.Advance(10 * time.Second)
		st := e.sweep()
		sweeps++
		retries += st.QuarantineRetries
		if st.EventCount() == 0 && o.StatusID != "9" {
			t.Errorf("sweep %d: the change of order %d was not published", i, o.ID)
		}
		want += st.EventCount()
	}
	// The watermark passed the quarantined entry (it trails the newest
	// stamp served by the settle, poller/clock.go: after the sweeps above).
	if m, _ := e.store.Meta(); !m.Watermark.After(changedAt.UpdatedAt) {
		t.Errorf("watermark %v; want past the quarantined entry (%v)", m.Watermark, changedAt.UpdatedAt)
	}
	calls := e.sim.Stats().SearchCalls - searches
	if retries == 0 || retries > sweeps {
		t.Errorf("%d retries by id in %d sweeps; want some, at most one a sweep", retries, sweeps)
	}
	// A sweep of a quiet 40 s window is one call, and one more for the retry.
	if calls > 3*sweeps {
		t.Errorf("%d search calls in %d sweeps: the quarantine must not widen the window", calls, sweeps)
	}
	if len(e.quarantined()) != 1 {
		t.Fatal("the order left the quarantine while its entry is still undecodable")
	}
	if got := e.quarantined()[0].Attempts; got < 2 {
		t.Errorf("attempts %d after the retries; want them counted", got)
	}
	if n := len(e.eventsOf(victim.ID)); n != 0 {
		t.Errorf("%d events of the undecodable order", n)
	}

	// The entry decodes again, its order unchanged since: a retry by id
	// publishes the change made while it was quarantined.
	if err := e.sim.Corrupt(victim.ID, plentysim.CorruptNone); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Minute)
	st = e.sweep()
	if st.QuarantineLeft != 1 || len(e.quarantined()) != 0 {
		t.Fatalf("QuarantineLeft %d, quarantine %+v; want the order released", st.QuarantineLeft, e.quarantined())
	}
	evs := e.eventsOf(victim.ID)
	if len(evs) != 1 || evs[0].Type != "order.status_changed" || evs[0].Data.Before == nil ||
		string(evs[0].Data.Before.StatusID) != before || string(evs[0].Data.After.StatusID) != "11.1" {
		t.Fatalf("events of the released order: %+v; want one status_changed %s -> 11.1", evs, before)
	}
	if !strings.Contains(logs.String(), "order left quarantine") {
		t.Error("no log line for the order leaving the quarantine")
	}
	e.quiesce()
	if n := len(e.eventsOf(victim.ID)); n != 1 {
		t.Errorf("%d events of the released order after the next sweep; want 1 (no double)", n)
	}
	e.assertSnapshotMatches()
}

// TestQuarantineNewOrder: an order created while its entry is undecodable
// is published as created once it decodes, here in a window that reads a
// later change of it.
func TestQuarantineNewOrder(t *testing.T) {
	e := newEnv(t, plentysim.Config{}, poller.Config{})
	e.sim.Generate(20, t0.Add(-time.Hour), t0.Add(-time.Minute))
	e.sweep()
	e.clk.Advance(time.Minute)
	o := e.sim.AddOrder(plentysim.Order{StatusID: "3", CreatedAt: e.clk.Now()})
	if err := e.sim.Corrupt(o.ID, plentysim.CorruptStatus); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(10 * time.Second)
	e.sweep()
	if qs := e.quarantined(); len(qs) != 1 || qs[0].OrderID != o.ID {
		t.Fatalf("quarantine = %+v", qs)
	}
	e.clk.Advance(time.Minute)
	e.sim.Corrupt(o.ID, plentysim.CorruptNone)
	e.sim.SetStatus(o.ID, "5")
	e.clk.Advance(10 * time.Second)
	st := e.sweep()
	evs := e.eventsOf(o.ID)
	if len(evs) != 1 || evs[0].Type != "order.created" || string(evs[0].Data.After.StatusID) != "5" {
		t.Fatalf("events: %+v; want one created with status 5", evs)
	}
	if st.QuarantineLeft != 1 || len(e.quarantined()) != 0 {
		t.Errorf("QuarantineLeft %d, quarantine %+v", st.QuarantineLeft, e.quarantined())
	}
}

// TestQuarantineRetryIsBounded: many quarantined orders are retried at
// most QuarantineCalls calls a sweep, the ones tried longest ago first, so
// that every one is reached in turn.
func TestQuarantineRetryIsBounded(t *testing.T) {
	e := newEnv(t, plentysim.Config{}, poller.Config{})
	e.sim.Generate(300, t0.Add(-time.Hour), t0.Add(-time.Minute))
	e.sweep()
	e.clk.Advance(time.Minute)
	bad := map[int64]bool{}
	for _, o := range e.sim.Orders()[:120] {
		e.sim.Corrupt(o.ID, plentysim.CorruptStatus)
		e.sim.Touch(o.ID)
		bad[o.ID] = true
	}
	e.clk.Advance(10 * time.Second)
	e.sweep()
	if n := len(e.quarantined()); n != 120 {
		t.Fatalf("%d quarantined, want 120", n)
	}
	for _, o := range e.sim.Orders()[:120] {
		e.sim.Corrupt(o.ID, plentysim.CorruptNone)
	}
	left := 120
	for sweep := 1; left > 0; sweep++ {
		if sweep > 3 {
			t.Fatalf("%d orders still quarantined after 3 sweeps at 50 a sweep", left)
		}
		e.clk.Advance(time.Minute)
		before := e.sim.Stats().SearchCalls
		st := e.sweep()
		if st.QuarantineRetries > 50 || e.sim.Stats().SearchCalls-before > 2 {
			t.Errorf("sweep %d: %d orders retried in %d calls; want at most 50 in 1 call (+1 for the window)", sweep, st.QuarantineRetries, e.sim.Stats().SearchCalls-before)
		}
		left = len(e.quarantined())
	}
	// Released by the retry, silently: the orders did not change status.
	if n := len(e.events()); n != 0 {
		t.Errorf("%d events for orders whose status did not change", n)
	}
	e.assertSnapshotMatches()
}

// TestQuarantineSurvivesRestart: the quarantine is in the state file; a
// new process (after a kill between two sweeps) retries the order and
// publishes its change.
func TestQuarantineSurvivesRestart(t *testing.T) {
	e := newEnv(t, plentysim.Config{}, poller.Config{})
	e.sim.Generate(50, t0.Add(-time.Hour), t0.Add(-time.Minute))
	e.sweep()
	victim, _ := e.quarantineOne(7, "11.1")
	path := e.store.Path()
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}

	store, err := state.Open(path, state.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e.store = store
	if qs := e.quarantined(); len(qs) != 1 || qs[0].OrderID != victim.ID {
		t.Fatalf("after the restart: quarantine %+v", qs)
	}
	e.client = e.newClient(e.srv.URL)
	if e.poll, err = poller.New(e.client, e.store, e.cfg); err != nil {
		t.Fatal(err)
	}
	e.sim.Corrupt(victim.ID, plentysim.CorruptNone)
	e.clk.Advance(time.Minute)
	st := e.sweep()
	evs := e.eventsOf(victim.ID)
	if st.QuarantineLeft != 1 || len(evs) != 1 || string(evs[0].Data.After.StatusID) != "11.1" {
		t.Fatalf("after the restart: left %d, events %+v", st.QuarantineLeft, evs)
	}
}

// TestQuarantineWithoutRetryByID: a service that ignores orderId=in: is
// detected (its answer holds other orders) and no longer asked by id; the
// order leaves the quarantine when a later change of it is read decodable.
func TestQuarantineWithoutRetryByID(t *testing.T) {
	var logs bytes.Buffer
	e := newEnv(t, plentysim.Config{}, poller.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	e.serveVia(ignoresOrderID{e.sim})
	e.sim.Generate(50, t0.Add(-time.Hour), t0.Add(-time.Minute))
	e.sweep()
	victim, _ := e.quarantineOne(9, "11.1")
	if victim.StatusID == "8" {
		t.Fatal("pick a victim whose status is not 8")
	}
	e.clk.Advance(2 * e.cfg.Overlap) // past the overlap: no window reads the entry again
	e.sweep()
	e.sim.Corrupt(victim.ID, plentysim.CorruptNone)
	for range 3 {
		e.clk.Advance(time.Minute)
		e.sweep()
	}
	if !strings.Contains(logs.String(), "does not accept a search by orderId=in:") {
		t.Errorf("the ignored filter is not logged:\n%s", logs.String())
	}
	if len(e.quarantined()) != 1 || len(e.eventsOf(victim.ID)) != 0 {
		t.Fatalf("quarantine %+v, events %+v: a retry that cannot ask by id changes nothing", e.quarantined(), e.eventsOf(victim.ID))
	}
	e.sim.SetStatus(victim.ID, "8") // not its status before the quarantine
	e.clk.Advance(10 * time.Second)
	st := e.sweep()
	evs := e.eventsOf(victim.ID)
	if st.QuarantineLeft != 1 || len(evs) != 1 || string(evs[0].Data.After.StatusID) != "8" {
		t.Fatalf("left %d, events %+v; want the order released with its latest status", st.QuarantineLeft, evs)
	}
}

// TestBadEntrySkipHasNoQuarantine: skip logs, counts and goes on; it
// records and retries nothing.
func TestBadEntrySkipHasNoQuarantine(t *testing.T) {
	e := newEnv(t, plentysim.Config{}, poller.Config{BadEntries: poller.BadEntrySkip})
	e.sim.Generate(20, t0.Add(-time.Hour), t0.Add(-time.Minute))
	e.sweep()
	_, st := e.quarantineOne(3, "11.1")
	if st.BadEntries != 1 || len(e.quarantined()) != 0 || st.QuarantineEntered != 0 {
		t.Errorf("skip: BadEntries %d, quarantine %+v", st.BadEntries, e.quarantined())
	}
}

// TestBadEntryPolicies: quarantine is the default, hold its alias.
func TestBadEntryPolicies(t *testing.T) {
	store, err := state.Open(filepath.Join(t.TempDir(), "s.db"), state.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, p := range []poller.BadEntryPolicy{"", poller.BadEntryHold, poller.BadEntryQuarantine, poller.BadEntrySkip} {
		if _, err := poller.New(nil, store, poller.Config{StartFrom: t0, BadEntries: p}); err != nil {
			t.Errorf("policy %q: %v", p, err)
		}
	}
	if _, err := poller.New(nil, store, poller.Config{StartFrom: t0, BadEntries: "ignore"}); err == nil || !strings.Contains(err.Error(), "quarantine") {
		t.Errorf("policy ignore: %v", err)
	}
}

// TestBadEntryWithoutIDHoldsOnlyTheWatermark: an entry whose id cannot be
// read cannot be quarantined by order; it holds the watermark before its
// slice, and the slices after it are still read and published.
func TestBadEntryWithoutIDHoldsOnlyTheWatermark(t *testing.T) {
	e := newEnv(t, plentysim.Config{MaxItemsPerPage: 50}, poller.Config{ItemsPerPage: 50, SlicePages: 2})
	e.sim.Generate(400, t0.Add(-2*time.Hour), t0.Add(-time.Hour))
	e.sweep()
	orders := e.sim.Orders()
	victim := orders[0]
	e.clk.Advance(time.Minute)
	e.sim.Corrupt(victim.ID, plentysim.CorruptID)
	e.sim.Touch(victim.ID)
	badAt, _ := e.sim.Order(victim.ID)
	changed := 0
	for i, o := range orders[1:] { // 399 changes over the next minutes: several slices
		if i%50 == 0 {
			e.clk.Advance(20 * time.Second)
		}
		if o.StatusID != "9" {
			changed++
		}
		e.sim.SetStatus(o.ID, "9")
	}
	e.clk.Advance(10 * time.Second)
	st, err := e.poll.Sweep(context.Background())
	if !errors.Is(err, poller.ErrBadEntries) || st.Held.IsZero() {
		t.Fatalf("err %v, held %v; want ErrBadEntries and the watermark held", err, st.Held)
	}
	if m, _ := e.store.Meta(); !m.Watermark.Before(badAt.UpdatedAt) {
		t.Errorf("watermark %v passed the entry without an id (%v)", m.Watermark, badAt.UpdatedAt)
	}
	if st.Slices < 2 {
		t.Errorf("%d slices: the test needs the window cut", st.Slices)
	}
	if n := len(e.events()); n != changed {
		t.Errorf("%d events, want %d: the orders after the held slice must flow on", n, changed)
	}
	if len(e.quarantined()) != 0 {
		t.Errorf("quarantine %+v: an entry without an id has no order to quarantine", e.quarantined())
	}
	e.sim.Corrupt(victim.ID, plentysim.CorruptNone)
	e.clk.Advance(time.Minute)
	e.sweep()
	if m, _ := e.store.Meta(); !m.Watermark.After(badAt.UpdatedAt) {
		t.Errorf("watermark %v still held after the entry became readable", m.Watermark)
	}
	e.assertSnapshotMatches()
}

// TestQuarantineReleaseIsNoLateArrival: an order whose entry decodes again
// inside the overlap is released by the window; it was read in time, only
// undecodable, so it is no late arrival (which would stretch the measured
// settle and overlap).
func TestQuarantineReleaseIsNoLateArrival(t *testing.T) {
	e := newEnv(t, plentysim.Config{}, poller.Config{Overlap: 5 * time.Minute})
	e.sim.Generate(20, t0.Add(-time.Hour), t0.Add(-time.Minute))
	e.sweep()
	victim, _ := e.quarantineOne(5, "11.1")
	e.sim.Corrupt(victim.ID, plentysim.CorruptNone)
	e.clk.Advance(10 * time.Second) // the retry rests; the overlap reads it
	st := e.sweep()
	if st.QuarantineLeft != 1 || st.QuarantineRetries != 0 || len(e.eventsOf(victim.ID)) != 1 {
		t.Fatalf("left %d, retries %d, events %+v; want a release by the window", st.QuarantineLeft, st.QuarantineRetries, e.eventsOf(victim.ID))
	}
	if len(st.LateArrivals) != 0 {
		t.Errorf("late arrivals %v: the released order was counted late", st.LateArrivals)
	}
}

// forgetsByID serves the simulator as a service that no longer returns
// any order by id (as if they were deleted).
type forgetsByID struct{ sim http.Handler }

func (h forgetsByID) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if strings.HasPrefix(q.Get("orderId"), "in:") {
		q.Set("orderId", "in:1")
		r.URL.RawQuery = q.Encode()
	}
	h.sim.ServeHTTP(w, r)
}

// TestQuarantineOrderGone: an order the service no longer returns by id
// leaves the quarantine (there is no entry to wait for), silently.
func TestQuarantineOrderGone(t *testing.T) {
	var logs bytes.Buffer
	e := newEnv(t, plentysim.Config{}, poller.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	e.serveVia(forgetsByID{e.sim})
	e.sim.Generate(20, t0.Add(-time.Hour), t0.Add(-time.Minute))
	e.sweep()
	victim, _ := e.quarantineOne(4, "11.1")
	left := 0
	for range 12 { // until no window re-reads the entry and the retry is due
		e.clk.Advance(10 * time.Second)
		left += e.sweep().QuarantineLeft
	}
	if left != 1 || len(e.quarantined()) != 0 || len(e.eventsOf(victim.ID)) != 0 {
		t.Errorf("left %d, quarantine %+v, events %+v", left, e.quarantined(), e.eventsOf(victim.ID))
	}
	if !strings.Contains(logs.String(), "no longer returns the order") {
		t.Errorf("no reason logged:\n%s", logs.String())
	}
}

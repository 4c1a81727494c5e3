package poller_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/state"
)

// corrupting wraps the simulator and breaks the entry of one order id in
// every search response (a valid page with one unreadable entry).
type corrupting struct {
	h  http.Handler
	id int64
	on bool
}

func (c *corrupting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !c.on {
		c.h.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, r)
	body := bytes.Replace(rec.Body.Bytes(), fmt.Appendf(nil, `"id":%d,`, c.id), fmt.Appendf(nil, `"id":"broken-%d",`, c.id), 1)
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(rec.Code)
	w.Write(body)
}

// TestBadEntryHoldsTheWatermark: an entry whose id cannot be read (the
// corrupting wrapper breaks the id) cannot be quarantined by order: with
// quarantine it holds the watermark before its slice; skip goes on.
func TestBadEntryHoldsTheWatermark(t *testing.T) {
	for _, policy := range []poller.BadEntryPolicy{poller.BadEntryQuarantine, poller.BadEntrySkip} {
		t.Run(string(policy), func(t *testing.T) {
			e := newEnv(t, plentysim.Config{}, poller.Config{BadEntries: policy})
			e.sim.Generate(50, t0.Add(-time.Hour), t0.Add(-time.Minute))
			e.sweep()
			victim := e.sim.Orders()[10]
			bad := &corrupting{h: e.sim, id: victim.ID}
			srv := httptest.NewServer(bad)
			defer srv.Close()
			p, err := poller.New(e.newClient(srv.URL), e.store, e.cfg)
			if err != nil {
				t.Fatal(err)
			}
			e.clk.Advance(time.Minute)
			other := e.sim.Orders()[20]
			e.sim.SetStatus(victim.ID, "9")
			e.sim.SetStatus(other.ID, "9")
			e.clk.Advance(10 * time.Second)
			bad.on = true
			before, _ := e.store.Meta()
			st, err := p.Sweep(context.Background())
			after, _ := e.store.Meta()
			if st.BadEntries != 1 {
				t.Errorf("BadEntries = %d, want 1", st.BadEntries)
			}
			if policy == poller.BadEntryQuarantine {
				victimAt, _ := e.sim.Order(victim.ID)
				if !errors.Is(err, poller.ErrBadEntries) || !after.Watermark.Before(victimAt.UpdatedAt) {
					t.Fatalf("hold: err %v, watermark %v -> %v; want ErrBadEntries and the watermark before the entry (%v)", err, before.Watermark, after.Watermark, victimAt.UpdatedAt)
				}
			} else if err != nil || !after.Watermark.After(before.Watermark) {
				t.Fatalf("skip: err %v, watermark %v -> %v", err, before.Watermark, after.Watermark)
			}
			if n := len(e.events()); n != 1 {
				t.Errorf("%d events; the readable change on the same page must still be committed", n)
			}
			// The service sends the entry readable again: with hold, the change is not lost.
			if policy == poller.BadEntrySkip {
				// Once the change is older than the overlap, nothing re-reads it.
				e.clk.Advance(2 * e.cfg.Overlap)
				if _, err := p.Sweep(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			bad.on = false
			e.clk.Advance(5 * time.Second)
			if _, err := p.Sweep(context.Background()); err != nil {
				t.Fatal(err)
			}
			want := 2
			if policy == poller.BadEntrySkip {
				want = 1 // the documented cost of skip: the change went unseen
			}
			if n := len(e.events()); n != want {
				t.Errorf("%d events after recovery, want %d", n, want)
			}
		})
	}
}

func TestOutboxFullPausesTheSweep(t *testing.T) {
	clk := &clock{t: t0}
	sim := plentysim.New(plentysim.Config{Now: clk.Now, Seed: 3})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	store, err := state.Open(t.TempDir()+"/state.db", state.Options{NoSync: true, OutboxMax: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	client, _ := plenty.New(plenty.Config{BaseURL: srv.URL, Username: "demo", Password: "demo", Now: clk.Now,
		Pacer: plenty.NewPacer(plenty.PacerConfig{Now: clk.Now, Sleep: clk.Sleep})})
	var published []string
	waits := 0
	// The "publisher": every pause of the sweep drains the outbox.
	drain := func(ctx context.Context, d time.Duration) error {
		waits++
		entries, err := store.Outbox(0, 100)
		if err != nil {
			return err
		}
		for _, en := range entries {
			published = append(published, en.ID)
			if err := store.DeleteOutbox(en.Seq); err != nil {
				return err
			}
		}
		return nil
	}
	p, err := poller.New(client, store, poller.Config{StartFrom: t0.Add(-time.Hour), EmitBaseline: true, ItemsPerPage: 5, Now: clk.Now, Sleep: drain})
	if err != nil {
		t.Fatal(err)
	}
	sim.Generate(100, t0.Add(-50*time.Minute), t0.Add(-time.Minute))
	st, err := p.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	published = append(published, outboxIDs(t, store)...)
	if st.OutboxWaits == 0 || waits == 0 {
		t.Error("the sweep never paused on a full outbox")
	}
	if len(published) != 100 || st.EventCount() != 100 {
		t.Errorf("%d events published, %d counted; want 100: nothing may be dropped", len(published), st.EventCount())
	}
}

func outboxIDs(t *testing.T, s *state.Store) []string {
	entries, err := s.Outbox(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.ID
	}
	return ids
}

func TestBulkChangeInOneSecond(t *testing.T) {
	for _, keyset := range []poller.KeysetMode{poller.KeysetOff, poller.KeysetOn, poller.KeysetAuto} {
		t.Run(fmt.Sprint("keyset=", keyset), func(t *testing.T) {
			e := newEnv(t, plentysim.Config{MaxItemsPerPage: 50}, poller.Config{ItemsPerPage: 50, SlicePages: 2, Keyset: keyset})
			e.sim.Generate(700, t0.Add(-24*time.Hour), t0.Add(-time.Hour))
			e.sweep()
			e.clk.Advance(time.Minute)
			changed := 0
			for _, o := range e.sim.Orders()[:600] { // a bulk status change: 600 orders, one second
				if !order.MustDecimal(o.StatusID).Equal(order.MustDecimal("8")) {
					changed++
				}
				e.sim.SetStatus(o.ID, "8")
			}
			e.clk.Advance(10 * time.Second)
			st := e.sweep()
			calls, sweeps := st.Calls, 1
			// Keyset reads KeysetPages (8) pages of the second a sweep; the
			// next sweep goes on from there.
			for ; !st.Held.IsZero() && sweeps < 3; sweeps++ {
				e.clk.Advance(time.Second)
				st = e.sweep()
				calls += st.Calls
			}
			if !st.Held.IsZero() {
				t.Fatalf("the bulk second is still held after %d sweeps", sweeps)
			}
			if n := len(e.events()); n != changed {
				t.Errorf("%d events, want %d", n, changed)
			}
			// 600 orders in one second at 50 a page: 12 pages, plus the calls
			// that find the bulk second and the slices around it (again in
			// the second sweep, when keyset took two).
			if calls > 24+12*(sweeps-1) {
				t.Errorf("%d calls in %d sweeps for 600 orders at 50 a page", calls, sweeps)
			}
			t.Logf("%d calls in %d sweeps", calls, sweeps)
			e.assertSnapshotMatches()
		})
	}
}

// TestShutdownDuringThrottleBlock: a sweep waiting out a long Retry-After
// returns as soon as it is told to stop.
func TestShutdownDuringThrottleBlock(t *testing.T) {
	sim := plentysim.New(plentysim.Config{Seed: 9, Limits: plentysim.Limits{ShortLimit: 3, ShortPeriod: time.Hour}})
	sim.Generate(10, time.Now().Add(-time.Hour), time.Now().Add(-time.Minute))
	srv := httptest.NewServer(sim)
	defer srv.Close()
	store, err := state.Open(t.TempDir()+"/state.db", state.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	client, _ := plenty.New(plenty.Config{BaseURL: srv.URL, Username: "demo", Password: "demo", Tokens: store})
	p, err := poller.New(client, store, poller.Config{StartFrom: time.Now().Add(-2 * time.Hour), Settle: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := p.Sweep(ctx); ctx.Err() != nil {
				done <- err
				return
			}
		}
	}()
	// Three calls an hour: after the first the pacer spreads the other two
	// over the hour (and keeps the last as its reserve): the next call
	// waits about half an hour.
	deadline := time.Now().Add(10 * time.Second)
	for client.Pacer().Next().Before(time.Now().Add(time.Minute)) {
		if time.Now().After(deadline) {
			t.Fatal("the pacer never blocked")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("the sweep did not return within 3s of the cancel while the pacer blocked")
	}
}

package replica_test

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/plentysim"
)

// A takeover inside the group's first sync: the first active records its
// baseline and starts reading; an order it has not read yet changes after
// the baseline; the active dies (no handover, no checkpoint of its own
// after the baseline). The successor must sync with the same baseline:
// the change lies above it and gets exactly one event (a successor that
// picks its own, later baseline records it silently: lost).
func TestTakeoverInsideFirstSync(t *testing.T) {
	t.Parallel()
	w := &chaosWorld{t: t, g: newGroup(t), rng: rand.New(rand.NewPCG(1, 2)), faults: map[string]int{}, quiet: true}
	sim := plentysim.New(plentysim.Config{Seed: 3})
	sim.Generate(300, time.Now().Add(-20*time.Hour), time.Now().Add(-time.Minute))
	w.sim, w.initial = sim, map[int64]plentysim.Order{}
	for _, o := range sim.Orders() {
		w.initial[o.ID] = o
	}
	// r1's first reading search (past the one that learns the server
	// clock, itemsPerPage=1) is held until r1 is dead, then refused.
	reading, dead := w.holdFirstReads(sim)

	r1 := w.start("r1", 11)
	testnats.WaitFor(t, "r1 active", 20*time.Second, func() bool { return r1.w.Working() })
	r2 := w.start("r2", 12)
	select {
	case <-reading:
	case <-time.After(20 * time.Second):
		t.Fatalf("r1 never read:\n%s", r1.logs.String())
	}
	if !strings.Contains(r1.logs.String(), "recording the baseline") {
		t.Fatalf("r1 reads without a baseline:\n%s", r1.logs.String())
	}
	// Past the baseline (server now - settle at r1's first sweep).
	time.Sleep(1100 * time.Millisecond)
	changed := w.initial[sim.Orders()[0].ID]
	status := "7"
	if changed.StatusID == status {
		status = "8"
	}
	if _, err := sim.SetStatus(changed.ID, status); err != nil {
		t.Fatal(err)
	}
	// r1 dies: its connection gone, its held call refused.
	r1.nc.Close()
	close(dead)
	r1.cancel()
	<-r1.done

	testnats.WaitFor(t, "r2 active", 20*time.Second, func() bool { return r2.w.Working() })
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end) && len(w.judgeEvents(false)) > 0; {
		time.Sleep(200 * time.Millisecond)
	}
	r2.kill(t)
	if lost := w.judgeEvents(true); len(lost) > 0 {
		t.Logf("r2's log:\n%s", tail(r2.logs.String(), 8000))
	}
	n := 0
	for _, ev := range w.events() {
		if ev.OrderID == changed.ID {
			n++
		}
	}
	if n != 1 {
		t.Errorf("order %d changed after the baseline: %d events, want 1", changed.ID, n)
	}
}

// TestTakeoverInsideFirstSyncKeepsItsStart: the first active starts its
// first sync at its own now - 24 h and dies inside it; the successor,
// seconds later, must read from the same start: an order last changed
// between the two starts is in the group's snapshot, so its next change
// is a status_changed with its before (a successor that starts from its
// own clock never reads it: its next change is discovered, its history
// lost).
func TestTakeoverInsideFirstSyncKeepsItsStart(t *testing.T) {
	t.Parallel()
	w := &chaosWorld{t: t, g: newGroup(t), rng: rand.New(rand.NewPCG(1, 3)), faults: map[string]int{}, quiet: true}
	sim := plentysim.New(plentysim.Config{Seed: 4})
	begin := time.Now()
	edge := begin.Add(-24*time.Hour + 2*time.Second) // above r1's start, below a start 2 s later
	sim.Generate(1, edge, edge)
	sim.Generate(20, begin.Add(-20*time.Hour), begin.Add(-time.Minute))
	w.sim, w.initial = sim, map[int64]plentysim.Order{}
	var old plentysim.Order
	for _, o := range sim.Orders() {
		w.initial[o.ID] = o
		if o.UpdatedAt.Before(begin.Add(-23 * time.Hour)) {
			old = o
		}
	}
	if old.ID == 0 {
		t.Fatal("no order at the edge of the first sync")
	}
	// r1's first reading search (past the one that learns the server
	// clock) is held until it is dead, then refused: it dies inside its
	// first sync, its baseline (and no watermark) in the group's
	// checkpoint.
	reading, dead := w.holdFirstReads(sim)

	r1 := w.start("r1", 11)
	testnats.WaitFor(t, "r1 active", 20*time.Second, func() bool { return r1.w.Working() })
	select {
	case <-reading:
	case <-time.After(20 * time.Second):
		t.Fatalf("r1 never read:\n%s", r1.logs.String())
	}
	time.Sleep(time.Until(edge.Add(24*time.Hour + 2*time.Second))) // a successor's own start is past the order
	r2 := w.start("r2", 12)
	r1.nc.Close()
	close(dead)
	r1.cancel()
	<-r1.done

	testnats.WaitFor(t, "r2 active", 20*time.Second, func() bool { return r2.w.Working() })
	testnats.WaitFor(t, "the group's first sync done", 30*time.Second, func() bool {
		cp, ok := w.g.checkpoint()
		return ok && strings.Contains(string(cp.State), `"baselineDone":true`)
	})
	status := "7"
	if old.StatusID == status {
		status = "8"
	}
	if _, err := sim.SetStatus(old.ID, status); err != nil {
		t.Fatal(err)
	}
	var got []string
	testnats.WaitFor(t, "the change's event", 30*time.Second, func() bool {
		got = got[:0]
		for _, ev := range w.events() {
			if ev.OrderID == old.ID {
				got = append(got, string(ev.Type))
			}
		}
		return len(got) > 0
	})
	r2.kill(t)
	if len(got) != 1 || got[0] != "order.status_changed" {
		t.Errorf("order %d, last changed between the first active's start and its successor's, then changed: events %v, want one order.status_changed\nr2's log:\n%s",
			old.ID, got, tail(r2.logs.String(), 6000))
	}
}

// holdFirstReads serves sim as the world's shop, with r1's reading
// searches (past the one that learns the server clock, itemsPerPage=1)
// held until dead is closed, then refused; reading is closed at the
// first.
func (w *chaosWorld) holdFirstReads(sim *plentysim.Server) (reading <-chan struct{}, dead chan struct{}) {
	read, dead := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if instanceOf(r.Header.Get("User-Agent")) == "r1" && strings.Contains(r.URL.Path, "/orders") && r.URL.Query().Get("itemsPerPage") != "1" {
			once.Do(func() { close(read) })
			select {
			case <-dead:
			case <-r.Context().Done():
			}
			http.Error(rw, "gone", http.StatusServiceUnavailable)
			return
		}
		sim.ServeHTTP(rw, r)
	}))
	w.t.Cleanup(srv.Close)
	w.shop = srv.URL
	w.g.key = lease.Key(w.shop, stream)
	return read, dead
}

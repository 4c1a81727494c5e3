package poller_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
)

// failsByID serves the simulator, but answers a search by orderId=in:
// (the retry of quarantined orders) with status while fail is set, and
// counts those searches.
type failsByID struct {
	sim    http.Handler
	status int
	fail   atomic.Bool
	byID   atomic.Int64
}

func (h *failsByID) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Query().Get("orderId"), "in:") {
		h.byID.Add(1)
		if h.fail.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(h.status)
			fmt.Fprintf(w, `{"error":{"message":"failed by the test","code":%d}}`, h.status)
			return
		}
	}
	h.sim.ServeHTTP(w, r)
}

// A quarantined order whose retry by id fails (404, 403, 500) backs off:
// in 120 s of sweeps 10 s apart it is asked for at most once per
// QuarantineRetryEvery (30 s), each failure takes one call (a 500 is not
// retried through the client's backoff before the window is read), the
// other orders' changes are published by every sweep meanwhile, and once
// the service answers again the order is released with its change.
func TestQuarantineRetryBacksOffPerOrder(t *testing.T) {
	for _, status := range []int{http.StatusNotFound, http.StatusForbidden, http.StatusInternalServerError} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			e := newEnv(t, plentysim.Config{}, poller.Config{})
			h := &failsByID{sim: e.sim, status: status}
			e.serveVia(h)
			e.sim.Generate(50, t0.Add(-time.Hour), t0.Add(-time.Minute))
			e.sweep()
			victim, _ := e.quarantineOne(7, "11.1")
			h.fail.Store(true)

			other := e.sim.Orders()[20]
			for i := range 12 {
				status := fmt.Sprintf("%d", 20+i)
				if _, err := e.sim.SetStatus(other.ID, status); err != nil {
					t.Fatal(err)
				}
				e.clk.Advance(10 * time.Second)
				e.sweep()
				evs := e.eventsOf(other.ID)
				if len(evs) == 0 || string(evs[len(evs)-1].Data.After.StatusID) != status {
					t.Fatalf("sweep %d: the change of order %d to %s was not published", i+1, other.ID, status)
				}
			}
			t.Logf("%d searches by id in 120 s of sweeps", h.byID.Load())
			if n := h.byID.Load(); n < 1 || n > 4 {
				t.Errorf("%d searches by id in 120 s of sweeps; want 1 to 4 (one per 30 s at most, one call each)", n)
			}
			if qs := e.quarantined(); len(qs) != 1 || qs[0].RetryFailures == 0 || qs[0].RetryNotBefore.IsZero() {
				t.Fatalf("quarantine %+v: want the order with its failed retries noted", qs)
			}

			h.fail.Store(false)
			e.sim.Corrupt(victim.ID, plentysim.CorruptNone)
			e.clk.Advance(31 * time.Minute) // beyond the longest rest
			st := e.sweep()
			evs := e.eventsOf(victim.ID)
			if st.QuarantineLeft != 1 || len(evs) != 1 || string(evs[0].Data.After.StatusID) != "11.1" {
				t.Fatalf("after the service recovered: left %d, events %+v", st.QuarantineLeft, evs)
			}
		})
	}
}

// The probe that looks for late arrivals (a Recheck of one call) reads
// its window, not the quarantine: with a quarantined order due for a retry
// (whose search by id the service answers 404), a change that arrived
// later than the overlap is found and published by the probe's one call.
func TestProbeReadsItsWindowNotTheQuarantine(t *testing.T) {
	e := newEnv(t, plentysim.Config{}, poller.Config{})
	h := &failsByID{sim: e.sim, status: http.StatusNotFound}
	e.serveVia(h)
	e.sim.Generate(50, t0.Add(-time.Hour), t0.Add(-time.Minute))
	e.sweep()
	e.quarantineOne(7, "11.1")
	h.fail.Store(true)
	e.clk.Advance(time.Minute) // the quarantined order is due
	e.sweep()
	meta, err := e.store.Meta()
	if err != nil {
		t.Fatal(err)
	}
	late := e.sim.AddOrder(plentysim.Order{CreatedAt: meta.Watermark.Add(-time.Hour), UpdatedAt: meta.Watermark.Add(-2 * time.Minute)})
	e.clk.Advance(time.Minute) // due again
	byID := h.byID.Load()

	var width time.Duration
	st, _, err := e.poll.Recheck(context.Background(), meta.Watermark.Add(-10*time.Minute), meta.Watermark.Add(-e.cfg.Overlap), 1, &width)
	if err != nil {
		t.Fatal(err)
	}
	if n := h.byID.Load() - byID; n != 0 {
		t.Errorf("the probe made %d searches by id", n)
	}
	if evs := e.eventsOf(late.ID); len(evs) != 1 || st.Calls != 1 {
		t.Errorf("the probe made %d calls and published %d events for the late order %d; want 1 call and its event", st.Calls, len(evs), late.ID)
	}
}

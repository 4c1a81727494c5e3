package poller_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
)

// ignoresOrderID serves the simulator as a service that ignores the
// orderId filter silently, as unknown filters can be.
type ignoresOrderID struct{ sim http.Handler }

func (h ignoresOrderID) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	q.Del("orderId")
	r.URL.RawQuery = q.Encode()
	h.sim.ServeHTTP(w, r)
}

// bulkSecond sets the status of the first n orders in one second of the
// fake clock and returns how many changed.
func bulkSecond(e *env, n int, status string) int {
	changed := 0
	for _, o := range e.sim.Orders()[:n] {
		if !order.MustDecimal(o.StatusID).Equal(order.MustDecimal(status)) {
			changed++
		}
		e.sim.SetStatus(o.ID, status)
	}
	return changed
}

// TestKeysetAutoFallsBack: a service that ignores orderId=gt: is detected
// in auto mode, said so in the log, and the bulk second is read by offset;
// with WATCHER_KEYSET=true it is an error that names the cause.
func TestKeysetAutoFallsBack(t *testing.T) {
	for _, mode := range []poller.KeysetMode{poller.KeysetAuto, poller.KeysetOn} {
		t.Run(string(mode), func(t *testing.T) {
			var logs bytes.Buffer
			e := newEnv(t, plentysim.Config{MaxItemsPerPage: 50}, poller.Config{ItemsPerPage: 50, SlicePages: 2, Keyset: mode,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			e.serveVia(ignoresOrderID{e.sim})
			e.sim.Generate(700, t0.Add(-24*time.Hour), t0.Add(-time.Hour))
			e.sweep()
			e.clk.Advance(time.Minute)
			changed := bulkSecond(e, 600, "8")
			e.clk.Advance(10 * time.Second)
			_, err := e.poll.Sweep(context.Background())
			if mode == poller.KeysetOn {
				if !errors.Is(err, poller.ErrUnverified) || !strings.Contains(err.Error(), "ignores orderId=gt:") {
					t.Fatalf("keyset=true against a service that ignores the filter: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(logs.String(), "ignores the filter orderId=gt:") {
				t.Errorf("the fallback is not logged:\n%s", logs.String())
			}
			if n := len(e.events()); n != changed {
				t.Errorf("%d events, want %d", n, changed)
			}
			e.assertSnapshotMatches()
		})
	}
}

// TestBulkSecondDoesNotFreezeOthers: 1,000 orders set in one second, then a
// workflow changes one of them per search call, so that the second never
// verifies by offset. An unrelated order's change is published by the
// next sweep in every mode; the watermark never passes the bulk second
// before it is verified.
func TestBulkSecondDoesNotFreezeOthers(t *testing.T) {
	for _, mode := range []poller.KeysetMode{poller.KeysetAuto, poller.KeysetOff} {
		t.Run(string(mode), func(t *testing.T) {
			e := newEnv(t, plentysim.Config{MaxItemsPerPage: 50}, poller.Config{ItemsPerPage: 50, SlicePages: 2, Keyset: mode,
				Settle: 2 * time.Second, Overlap: 3 * time.Second})
			e.sim.Generate(1200, t0.Add(-24*time.Hour), t0.Add(-time.Hour))
			e.sweep()
			e.clk.Advance(time.Minute)
			bulkAt := e.clk.Now().Truncate(time.Second)
			bulkSecond(e, 1000, "8")
			e.clk.Advance(time.Second)
			bulk := e.sim.Orders()[:1000]
			next := 0
			e.sim.SetBeforeSearch(func(*http.Request, int) { // the workflow: one order a call
				if next < len(bulk) {
					e.sim.SetStatus(bulk[next].ID, "9")
					next++
				}
			})
			e.clk.Advance(time.Second)
			other := e.sim.Orders()[1100]
			e.sim.SetStatus(other.ID, "11.1")
			e.clk.Advance(3 * time.Second)
			st, err := e.poll.Sweep(context.Background())
			t.Logf("sweep after the bulk: %d calls, held at %v, err %v", st.Calls, st.Held, err)
			if !st.Watermark.Before(bulkAt) && !st.Held.IsZero() {
				t.Errorf("the watermark %v passed the held bulk second %v", st.Watermark, st.Held)
			}
			found := false
			for _, ev := range e.events() {
				if ev.Data.OrderID == other.ID && ev.Type == "order.status_changed" {
					found = true
				}
			}
			if !found {
				t.Errorf("the unrelated order %d's change is not published by the sweep after the bulk", other.ID)
			}
			for range 5 {
				e.clk.Advance(time.Second)
				_, _ = e.poll.Sweep(context.Background())
			}
			e.quiesce()
			e.assertSnapshotMatches()
			checkEvents(t, e.sim, e.events())
		})
	}
}

package faults

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
)

// The freshness measurements run the real binary against the simulator with
// the service's default limits and the default call share, and take a few
// minutes: go test ./faults -run TestFreshness -freshness -v
var freshness = flag.Bool("freshness", false, "measure detection latency and the first sync (minutes)")

// latencies returns p50 and p99 of ds.
func latencies(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration { return ds[min(int(math.Ceil(q*float64(len(ds))))-1, len(ds)-1)] }
	return at(0.5), at(0.99)
}

// measureLatency changes rate orders a second for d (each a distinct order
// as long as the pool lasts) and measures from each change to the moment
// JetStream stored its event (the message's timestamp); a change without
// an event 30 s after the last one counts as missed.
func measureLatency(t *testing.T, f *faultEnv, pool []plentysim.Order, rate float64, d time.Duration) (p50, p99 time.Duration, n, missed int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, _ := f.stream(ctx)
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := info.State.LastSeq + 1
	changed := map[int64]time.Time{}
	target := map[int64]string{}
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		<-tick.C
		o := pool[i%len(pool)]
		cur, _ := f.sim.Order(o.ID)
		to := "5"
		if cur.StatusID == "5" {
			to = "6"
		}
		if _, err := f.sim.SetStatus(o.ID, to); err != nil {
			t.Fatal(err)
		}
		changed[o.ID] = time.Now()
		target[o.ID] = to
	}
	time.Sleep(30 * time.Second)
	if info, err = stream.Info(ctx); err != nil {
		t.Fatal(err)
	}
	var got []time.Duration
	slow := slowThreshold()
	for seq := first; seq <= info.State.LastSeq; seq++ {
		msg, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		var ev struct {
			Data struct {
				OrderID int64 `json:"orderId"`
				After   struct {
					StatusID json.Number `json:"statusId"`
				} `json:"after"`
			} `json:"data"`
		}
		if json.Unmarshal(msg.Data, &ev) != nil {
			continue
		}
		// Our change's event: its status, after the change (a concurrent
		// mutator may change the same order to other statuses).
		if at, ok := changed[ev.Data.OrderID]; ok && ev.Data.After.StatusID.String() == target[ev.Data.OrderID] && msg.Time.After(at) {
			got = append(got, msg.Time.Sub(at))
			if lat := msg.Time.Sub(at); slow > 0 && lat > slow {
				t.Logf("slow: order %d changed %s, event %s (%v)", ev.Data.OrderID, at.Format("15:04:05.000"), msg.Time.Format("15:04:05.000"), lat.Round(10*time.Millisecond))
			}
			delete(changed, ev.Data.OrderID)
		}
	}
	p50, p99 = latencies(got)
	for id, at := range changed {
		t.Logf("no event within 30 s for order %d changed at %s", id, at.Format("15:04:05.000"))
	}
	return p50, p99, len(got) + len(changed), len(changed)
}

// slowThreshold is the latency above which measureLatency logs an event
// (FRESHNESS_SLOW: a duration, or any other value for 6 s; unset: none),
// to find which sweeps the slow events came from (FRESHNESS_LOG).
func slowThreshold() time.Duration {
	v := os.Getenv("FRESHNESS_SLOW")
	if v == "" {
		return 0
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d
	}
	return 6 * time.Second
}

func TestFreshness(t *testing.T) {
	if !*freshness {
		t.Skip("set -freshness to measure (minutes)")
	}
	// Interval 1s: the sweeps (one call a second) spend more than the share
	// (one call per 2.08 s) and live on the budget's hour of burst, which
	// is what a few minutes measure. Interval 3s: the sweeps fit the share
	// for good.
	for _, tc := range []struct {
		interval string
		rates    []float64
	}{{"1s", []float64{1, 5, 20}}, {"3s", []float64{20}}} {
		t.Run("detection latency, interval "+tc.interval, func(t *testing.T) {
			f := newFaultEnv(t, plentysim.Config{Limits: realLimits}, append(realEnv, "WATCHER_POLL_INTERVAL="+tc.interval)...)
			pool := f.addOrders(3000, time.Now().Add(-47*time.Hour), time.Now().Add(-time.Hour))
			f.start()
			waitSynced(t, f.addr)
			for _, rate := range tc.rates {
				calls := f.sim.Stats().SearchCalls
				start := time.Now()
				p50, p99, n, missed := measureLatency(t, f, pool, rate, 60*time.Second)
				took := time.Since(start)
				used := f.sim.Stats().SearchCalls - calls
				perDay := float64(used) / took.Seconds() * 86400
				t.Logf("interval %s, %g changes/s: %d changes, p50 %v, p99 %v (goal p99 <= interval + settle 2s + 1s); %d without an event after 30 s; %d searches in %v = %.0f a day (share 0.25 of 166,000 = 41,500)",
					tc.interval, rate, n, p50.Round(10*time.Millisecond), p99.Round(10*time.Millisecond), missed, used, took.Round(time.Second), perDay)
			}
			if testing.Verbose() {
				f.mu.Lock()
				t.Logf("watcher warnings and errors:\n%s", tail(grepLevel(f.logs.String()), 4000))
				if os.Getenv("FRESHNESS_SWEEPS") != "" {
					t.Logf("sweeps:\n%s", tail(f.logs.String(), 6000))
				}
				f.mu.Unlock()
			}
			f.quiesce()
			f.check()
		})
	}
	t.Run("first sync of 100,000 orders", func(t *testing.T) {
		f := newFaultEnv(t, plentysim.Config{Limits: realLimits}, realEnv...)
		f.addOrders(100000-300, time.Now().Add(-29*24*time.Hour), time.Now().Add(-time.Minute))
		start := time.Now()
		f.start()
		base := "http://" + f.addr
		waitFor(t, "the first sync to end", 10*time.Minute, func() bool {
			_, m := get(base + "/metrics")
			return metricValue(m, "orderwatch_first_sync_progress_ratio") == 1
		})
		took := time.Since(start)
		st := f.sim.Stats()
		pages := int(math.Ceil(100000 / 250.0))
		pace := time.Duration(float64(pages) / (float64(plentysim.DefaultShortLimit) / 20) * float64(time.Second))
		other := f.sim.Orders()[5]
		if _, err := f.sim.SetStatus(other.ID, "11.1"); err != nil {
			t.Fatal(err)
		}
		changed := time.Now()
		at, err := f.waitEvent(fmt.Sprintf("orders.status_changed.*.11_1.%d", other.ID), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("first sync of 100,000 orders: %v wall (process start to ratio 1), %d searches + %d logins; ceil(orders/250) = %d pages, at the short period's pace (200 per 20 s) %v: %.2fx the calls, %.2fx the pace; first change after it published in %v (goal <= 4s)",
			took.Round(100*time.Millisecond), st.SearchCalls, st.LoginCalls, pages, pace, float64(st.SearchCalls)/float64(pages), took.Seconds()/pace.Seconds(), at.Sub(changed).Round(10*time.Millisecond))
	})
}

// grepLevel keeps the log lines at warning level and above.
func grepLevel(logs string) string {
	var b strings.Builder
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, `"level":"WARN"`) || strings.Contains(l, `"level":"ERROR"`) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// waitSynced waits until the first sync is over (/readyz says "ok", not
// "first sync in progress").
func waitSynced(t *testing.T, addr string) {
	t.Helper()
	waitFor(t, "the first sync to end", time.Minute, func() bool {
		code, b := get("http://" + addr + "/readyz")
		return code == 200 && strings.TrimSpace(b) == "ok"
	})
}

package faults

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/state"
)

// TestFreshnessHostile measures detection latency, calls and 429s of the
// real binary under the conditions of issue 27: tight short periods,
// garbage answers, changes while paging, and a busy shop at the default
// configuration. One condition takes two to three minutes:
//
//	go test ./cmd/watcher -run 'TestFreshnessHostile/tight_12_per_15s' -freshness -v
//
// FRESHNESS_MEASURE (a duration) replaces the condition's measuring time.
func TestFreshnessHostile(t *testing.T) {
	if !*freshness {
		t.Skip("set -freshness to measure (minutes)")
	}
	tuned := realEnv // interval 1 s, settle 2 s, overlap 3 s, share 0.25
	for _, tc := range []struct {
		name     string
		limits   plentysim.Limits
		faults   plentysim.Faults
		env      []string
		defaults bool // the default configuration (no timing set)
		drained  bool // restart with the budget record's bucket empty (a day the bucket was spent)
		orders   int
		rate     float64 // changes a second, each a distinct order
		measure  time.Duration
	}{
		{name: "tight 12 per 15s", limits: plentysim.Limits{ShortLimit: 12, ShortPeriod: 15 * time.Second}, env: tuned, rate: 5},
		{name: "short 30 per 60s", limits: plentysim.Limits{ShortLimit: 30, ShortPeriod: 60 * time.Second}, env: tuned, rate: 5},
		{name: "short 200 per 20s", env: tuned, rate: 5},
		{name: "garbage 10 percent pages of 20", faults: plentysim.Faults{ServerErrorRate: 0.025, HTMLRate: 0.025, TruncateRate: 0.025, GarbageRate: 0.025},
			env: append([]string{"WATCHER_ITEMS_PER_PAGE=20"}, tuned...), rate: 5},
		{name: "churn pages of 10", faults: plentysim.Faults{Latency: 150 * time.Millisecond, ChangeWhilePaging: 0.5},
			env: append([]string{"WATCHER_ITEMS_PER_PAGE=10"}, tuned...), rate: 6},
		{name: "busy defaults", defaults: true, orders: 2000, rate: 20, measure: 90 * time.Second},
		{name: "busy defaults bucket drained", defaults: true, drained: true, orders: 2000, rate: 20, measure: 90 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFaultEnv(t, plentysim.Config{Limits: realLimits}, tc.env...)
			if tc.defaults {
				f.withDefaults()
			}
			orders := tc.orders
			if orders == 0 {
				orders = 3000
			}
			pool := f.addOrders(orders-300, time.Now().Add(-47*time.Hour), time.Now().Add(-time.Hour))
			f.start()
			waitSynced(t, f.addr)
			if tc.drained {
				f.drainBudget()
			}
			// The condition starts after the first sync.
			limits := tc.limits
			limits.LongLimit = realLimits.LongLimit
			f.sim.SetLimits(limits)
			if tc.limits.ShortPeriod > 0 {
				// The running period keeps its count: lowered limits can
				// refuse a call or two until it ends. Measured from the next.
				time.Sleep(tc.limits.ShortPeriod + 2*time.Second)
			}
			f.sim.SetFaults(tc.faults)
			measure := tc.measure
			if measure == 0 {
				measure = 60 * time.Second
			}
			if d, err := time.ParseDuration(os.Getenv("FRESHNESS_MEASURE")); err == nil && d > 0 {
				measure = d
			}
			before := f.sim.Stats()
			start := time.Now()
			during := make(chan int, 1) // searches while the changes are made
			go func() { time.Sleep(measure); during <- f.sim.Stats().SearchCalls - before.SearchCalls }()
			p50, p99, n, missed := measureLatency(t, f, pool, tc.rate, measure) // waits 30 s after the last change
			took := time.Since(start)
			after := f.sim.Stats()
			// No stall: after the changes stop, the sweeps reach past the
			// last one (quiesce fails the test after 60 s).
			f.sim.SetFaults(plentysim.Faults{})
			q := time.Now()
			f.quiesce()
			searches := after.SearchCalls - before.SearchCalls
			changing := <-during
			_, m := get("http://" + f.addr + "/metrics")
			t.Logf("RESULT %s: %g changes/s for %v: %d changes, p50 %v, p99 %v, %d without an event after 30 s; %d searches while changing = %.0f a day; %d searches in %v with the 30 s after = %.0f a day, %.2f per change; %d 429s, %d calls while blocked; caught up %v after the faults ended; in force: interval %gs, settle %gs, overlap %gs; %g rescans, %g sweep errors",
				tc.name, tc.rate, measure, n, p50.Round(10*time.Millisecond), p99.Round(10*time.Millisecond), missed,
				changing, float64(changing)/measure.Seconds()*86400, searches, took.Round(time.Second), float64(searches)/took.Seconds()*86400, float64(searches)/float64(max(n, 1)),
				after.Throttled429-before.Throttled429, after.CallsWhileBlocked-before.CallsWhileBlocked, time.Since(q).Round(100*time.Millisecond),
				metricValue(m, "orderwatch_poll_interval_seconds"), metricValue(m, "orderwatch_settle_seconds"), metricValue(m, "orderwatch_overlap_seconds"),
				metricValue(m, "orderwatch_rescans_total"), metricValue(m, `orderwatch_sweeps_total{result="error"}`))
			f.logWatcher(3000, 20000)
			f.check()
			if !strings.Contains(m, "orderwatch_outbox_depth 0") {
				t.Error("the outbox is not empty at the end")
			}
		})
	}
}

// drainBudget stops the watcher, empties the bucket of its budget record
// (as on a day that spent it) and starts it again.
func (f *faultEnv) drainBudget() {
	f.t.Helper()
	if err, _ := f.stop(); err != nil {
		f.t.Logf("stop: %v", err)
	}
	s, err := state.Open(f.state, state.Options{})
	if err != nil {
		f.t.Fatal(err)
	}
	var bs poller.BudgetState
	if found, err := s.LoadRecord(poller.BudgetRecord, &bs); err != nil || !found {
		f.t.Fatalf("budget record: found %v, %v", found, err)
	}
	bs.Level, bs.At = 0, time.Now()
	if err := s.SaveRecord(poller.BudgetRecord, bs); err != nil {
		f.t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		f.t.Fatal(err)
	}
	f.start()
	waitSynced(f.t, f.addr)
}

// logWatcher logs, with -v, the tail of the watcher's warnings and errors
// (warn bytes) and, with FRESHNESS_SWEEPS set, of its whole log (all
// bytes); the whole log goes to the file FRESHNESS_LOG names, suffixed
// with the test's name.
func (f *faultEnv) logWatcher(warn, all int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if path := os.Getenv("FRESHNESS_LOG"); path != "" {
		path += "." + strings.ReplaceAll(f.t.Name(), "/", "_")
		if err := os.WriteFile(path, []byte(f.logs.String()), 0o644); err != nil {
			f.t.Logf("FRESHNESS_LOG: %v", err)
		}
	}
	if !testing.Verbose() {
		return
	}
	f.t.Logf("watcher warnings and errors:\n%s", tail(grepLevel(f.logs.String()), warn))
	if os.Getenv("FRESHNESS_SWEEPS") != "" {
		f.t.Logf("sweeps:\n%s", tail(f.logs.String(), all))
	}
}

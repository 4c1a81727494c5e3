package faults

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
)

// withDefaults removes the harness's relaxed settings for the timings,
// the call share and the call timeout: the watcher runs with the
// configuration a user gets who sets only the required variables.
func (f *faultEnv) withDefaults() {
	drop := []string{"WATCHER_POLL_INTERVAL=", "WATCHER_SETTLE=", "WATCHER_OVERLAP=", "WATCHER_CALL_SHARE=", "WATCHER_PLENTY_TIMEOUT="}
	env := f.env[:0]
	for _, kv := range f.env {
		keep := true
		for _, d := range drop {
			keep = keep && !strings.HasPrefix(kv, d)
		}
		if keep {
			env = append(env, kv)
		}
	}
	f.env = env
}

// TestFreshnessDefaults measures detection latency at the DEFAULT
// configuration (no timing variable set: the interval follows the call
// budget, settle and overlap the measured late arrivals) at the service's
// default limits, quiet and under adversity, and extrapolates the calls a
// day. One condition takes about two minutes:
//
//	go test ./faults -run 'TestFreshnessDefaults/quiet' -freshness -v
func TestFreshnessDefaults(t *testing.T) {
	if !*freshness {
		t.Skip("set -freshness to measure (minutes)")
	}
	const rate = 2.0                                // our changes a second, each a distinct order
	measure := scale(60*time.Second, 6*time.Minute) // long: a probe (every 5 min) falls inside
	for _, tc := range []struct {
		name   string
		limits plentysim.Limits
		faults plentysim.Faults
		mutate float64 // other changes a second (the mutator), shifting pages
	}{
		{name: "quiet"},
		{name: "concurrent updates 20 a second", mutate: 20},
		{name: "short limit 12 per 15s", limits: plentysim.Limits{ShortLimit: 12, ShortPeriod: 15 * time.Second}},
		{name: "5xx HTML truncated 10% each", faults: plentysim.Faults{ServerErrorRate: 0.1, HTMLRate: 0.1, TruncateRate: 0.1}},
		{name: "slow responses 300ms, 10% 3s", faults: plentysim.Faults{Latency: 300 * time.Millisecond, SlowRate: 0.1, SlowDelay: 3 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limits := tc.limits
			limits.LongLimit = realLimits.LongLimit
			f := newFaultEnv(t, plentysim.Config{Limits: limits})
			f.withDefaults()
			pool := f.addOrders(3000, time.Now().Add(-47*time.Hour), time.Now().Add(-time.Hour))
			f.start()
			waitSynced(t, f.addr)
			f.sim.SetFaults(tc.faults)
			if tc.mutate > 0 {
				f.mutate(tc.mutate)
			}
			calls := f.sim.Stats().SearchCalls
			start := time.Now()
			p50, p99, n, missed := measureLatency(t, f, pool, rate, measure)
			took := time.Since(start)
			used := f.sim.Stats().SearchCalls - calls
			_, m := get("http://" + f.addr + "/metrics")
			t.Logf("defaults, %s, %g changes/s for %v: %d changes, p50 %v, p99 %v; %d without an event after 30 s; %d searches in %v = %.0f a day (share 0.25 of 166,000 = 41,500); in force: interval %gs, settle %gs, overlap %gs; %g rescans, %g sweep errors",
				tc.name, rate, measure, n, p50.Round(10*time.Millisecond), p99.Round(10*time.Millisecond), missed, used, took.Round(time.Second), float64(used)/took.Seconds()*86400,
				metricValue(m, "orderwatch_poll_interval_seconds"), metricValue(m, "orderwatch_settle_seconds"), metricValue(m, "orderwatch_overlap_seconds"),
				metricValue(m, "orderwatch_rescans_total"), metricValue(m, `orderwatch_sweeps_total{result="error"}`))
			if testing.Verbose() {
				f.mu.Lock()
				t.Logf("watcher warnings and errors:\n%s", tail(grepLevel(f.logs.String()), 3000))
				if os.Getenv("FRESHNESS_SWEEPS") != "" {
					t.Logf("sweeps:\n%s", f.logs.String())
				}
				f.mu.Unlock()
			}
			f.quiesce()
			f.check()
		})
	}
}

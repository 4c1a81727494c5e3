package main

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/orderwatch/orderwatch/internal/e2e"
	"github.com/orderwatch/orderwatch/pipeline"
	"strings"
	"testing"
	"time"
)

// TestTimingsVisible: with only the required settings, the interval in
// force follows the call budget (the simulator's default 166,000 calls a
// day at the default share 0.25: 2.082 s) and settle and overlap are at
// their floor (nothing measured), in /metrics with their source and in
// the state report; once the watcher stopped, `watcher state` shows them
// from the state file's record.
func TestTimingsVisible(t *testing.T) {
	e := newSessionEnv(t)
	stop := e.startDaemon(t)
	base := "http://" + e.httpAddr
	var m string
	e2e.WaitFor(t, "two sweeps", 60*time.Second, func() bool {
		_, m = e2e.Get(base + "/metrics")
		return e2e.MetricValue(m, `orderwatch_sweeps_total{result="ok"}`) >= 2
	})
	for name, want := range map[string]float64{
		"orderwatch_poll_interval_seconds":                                   2.082,
		"orderwatch_settle_seconds":                                          1,
		"orderwatch_overlap_seconds":                                         10,
		`orderwatch_timing_source_info{source="budget",timing="interval"}`:   1,
		`orderwatch_timing_source_info{source="default",timing="settle"}`:    1,
		`orderwatch_timing_source_info{source="default",timing="overlap"}`:   1,
		`orderwatch_timing_source_info{source="explicit",timing="interval"}`: 0,
		"orderwatch_late_arrivals_beyond_overlap_total":                      0,
	} {
		if got := e2e.MetricValue(m, name); got != want {
			t.Errorf("%s = %v; want %v", name, got, want)
		}
	}
	_, body := e2e.Get(base + "/state")
	var rep pipeline.Report
	if err := json.Unmarshal([]byte(body), &rep); err != nil || rep.Timings == nil || rep.Timings.IntervalSeconds != 2.082 || rep.Timings.IntervalSource != "budget" ||
		rep.Timings.SettleSeconds != 1 || rep.Timings.OverlapSource != "default" || rep.Timings.LastProbe.IsZero() {
		t.Errorf("GET /state timings: %s (%v)", body, err)
	}
	stop()
	var out, errOut bytes.Buffer
	if code := runState(context.Background(), nil, &out, &errOut); code != exitOK {
		t.Fatalf("watcher state: exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"interval       2.082s (budget)", "settle         1s (default)", "overlap        10s (default;"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("watcher state after the stop: no %q in\n%s", want, out.String())
		}
	}
}

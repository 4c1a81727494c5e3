package faults

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
)

// The service's Date header is wrong for longer than the minute after
// which the client follows it, ahead or behind, with and without a kill -9
// of the watcher inside the skew. The watermark is bounded by the order
// stamps (and, over a restart, by the clock record in the state file):
// nothing may be lost or doubled, and changes go on being published during
// the skew.
//
// The default run uses the delays the issue was reported with (realEnv:
// interval 1s, settle 2s, overlap 3s) and the service's real limits, with
// skews of 65 s (just past the minute; 30 s around a restart, whose new
// process meets the skewed Date first). -fault-long runs skews of 5
// minutes at the watcher's default (derived) interval, settle and overlap
// and the default call share.

// clockFaultEnv is the configuration of the clock scenarios.
func clockFaultEnv() []string {
	if *faultLong {
		return defaultConfig[:4] // the derived timings and the default share
	}
	return realEnv
}

// probe adds an order and returns how long its first event took
// to reach the stream (the detection delay).
func (f *faultEnv) probe(limit time.Duration) (time.Duration, error) {
	o := f.sim.AddOrder(plentysim.Order{})
	start := time.Now()
	at, err := f.waitEvent(fmt.Sprintf("orders.*.%d", o.ID), limit) // created or discovered
	if err != nil {
		return 0, fmt.Errorf("order %d created %v ago: no event: %w", o.ID, time.Since(start).Round(time.Second), err)
	}
	return at.Sub(start), nil
}

// watermarkNotAhead fails when the watermark metric is ahead of the
// service's true clock now.
func (f *faultEnv) watermarkNotAhead(now time.Time) {
	f.t.Helper()
	_, m := get("http://" + f.addr + "/metrics")
	if wm := time.Unix(int64(metricValue(m, "orderwatch_watermark_timestamp_seconds")), 0); wm.After(now) {
		f.t.Errorf("the watermark %v is ahead of the service's clock %v", wm, now)
	}
}

// clockJumps returns the orderwatch_clock_jumps_total series.
func (f *faultEnv) clockJumps() []string {
	_, m := get("http://" + f.addr + "/metrics")
	var jumps []string
	for _, line := range strings.Split(m, "\n") {
		if strings.HasPrefix(line, "orderwatch_clock_jumps_total{") {
			jumps = append(jumps, strings.TrimPrefix(line, "orderwatch_clock_jumps_total"))
		}
	}
	return jumps
}

// clockScenario runs one skew of the Date header by skew for short (5
// minutes under -fault-long) while orders change at 5 a second; with
// restart, the watcher is killed (kill -9) 5 s into the skew and started
// again while the Date is still wrong.
func clockScenario(t *testing.T, skew, short time.Duration, restart bool) {
	dur := scale(short, 5*time.Minute)
	limit := scale(30*time.Second, 2*time.Minute) // a probe's event, at most
	f := newFaultEnv(t, plentysim.Config{Limits: realLimits}, clockFaultEnv()...)
	f.start()
	waitSynced(t, f.addr)
	f.mutate(5)
	before, err := f.probe(limit)
	if err != nil {
		t.Fatalf("before the skew: %v", err)
	}
	f.sim.SetFaults(plentysim.Faults{DateSkew: skew})
	start := time.Now()
	if restart {
		time.Sleep(5 * time.Second)
		f.kill()
		f.start()
	}
	var during []time.Duration
	for time.Since(start) < dur {
		d, err := f.probe(limit)
		if err != nil {
			t.Errorf("%v into the skew: %v", time.Since(start).Round(time.Second), err)
			break
		}
		during = append(during, d)
		f.watermarkNotAhead(time.Now())
		time.Sleep(scale(3*time.Second, 20*time.Second))
	}
	f.sim.SetFaults(plentysim.Faults{})
	after, err := f.probe(limit)
	if err != nil {
		t.Errorf("after the skew: %v", err)
	}
	if *faultLong {
		// At the default delays the watermark trails by about a minute:
		// wait for it past the last change before quiesce's own minute.
		f.mutStop()
		<-f.mutDone
		f.waitWatermarkPastLastChange(3 * time.Minute)
	}
	f.quiesce()
	f.watermarkNotAhead(time.Now())
	n := f.check()
	jumps := f.clockJumps()
	if len(jumps) == 0 {
		t.Errorf("no clock jump counted for a Date %v off for %v", skew, dur)
	}
	verdict := "0 lost, 0 doubled, 0 unsound"
	if t.Failed() {
		verdict = "FAILED (see above)"
	}
	t.Logf("Date %v for %v (restart inside: %v), %d changes, %d events checked: %s; detection delay before %v, during the skew max %v (median %v, %d probes), after %v; clock jumps %v",
		skew, dur, restart, len(f.sim.History()), n, verdict, before.Round(time.Millisecond), maxDur(during).Round(time.Millisecond),
		median(during).Round(time.Millisecond), len(during), after.Round(time.Millisecond), jumps)
}

// waitWatermarkPastLastChange waits until the watermark has passed the
// simulator's last change.
func (f *faultEnv) waitWatermarkPastLastChange(limit time.Duration) {
	f.t.Helper()
	var last time.Time
	for _, ch := range f.sim.History() {
		if ch.At.After(last) {
			last = ch.At
		}
	}
	waitFor(f.t, "the watermark to pass the last change", limit, func() bool {
		_, m := get("http://" + f.addr + "/metrics")
		return time.Unix(int64(metricValue(m, "orderwatch_watermark_timestamp_seconds")), 0).After(last)
	})
}

func maxDur(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Max(ds)
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestFaultClockDateAheadLong: the Date header is 2 h ahead for longer
// than the minute after which the client follows it (the issue: 257 of
// 650 changes never published).
func TestFaultClockDateAheadLong(t *testing.T) { clockScenario(t, 2*time.Hour, 65*time.Second, false) }

// TestFaultClockDateBehindLong: the Date header is 2 h behind for longer
// than a minute.
func TestFaultClockDateBehindLong(t *testing.T) {
	clockScenario(t, -2*time.Hour, 65*time.Second, false)
}

// TestFaultClockRestartInsideSkewAhead: kill -9 inside a skew of 2 h
// ahead; the new process meets the skewed Date first (the issue: 124 of
// 199 changes lost), then the clock comes right.
func TestFaultClockRestartInsideSkewAhead(t *testing.T) {
	t.Parallel() // its own simulator, NATS server, state file and port; mostly waiting
	clockScenario(t, 2*time.Hour, 30*time.Second, true)
}

// TestFaultClockRestartInsideSkewBehind: the same, 2 h behind.
func TestFaultClockRestartInsideSkewBehind(t *testing.T) {
	t.Parallel()
	clockScenario(t, -2*time.Hour, 30*time.Second, true)
}

// TestFaultClockServiceSetBack: the service's own clock (its stamps and its
// Date) is set back for good, by more than overlap + settle, while orders
// change: the new stamps land below the watermark. The client follows the
// Date after a minute; the sweep finds changes it has not seen below the
// window, rewinds the watermark and forgets the earlier stamps. Nothing is
// lost; the changes of that minute are published late. Orders change only
// after the step (a change whose stamp lies below the order's previous one
// is taken for a stale read: see docs/how-it-works.md, "The service's clock and the watermark").
func TestFaultClockServiceSetBack(t *testing.T) {
	var off atomic.Int64
	simNow := func() time.Time { return time.Now().Add(time.Duration(off.Load())) }
	step := scale(30*time.Second, 3*time.Minute)
	limit := scale(2*time.Minute, 4*time.Minute)
	f := newFaultEnv(t, plentysim.Config{Limits: realLimits, Now: simNow}, clockFaultEnv()...)
	f.start()
	waitSynced(t, f.addr)
	before, err := f.probe(limit)
	if err != nil {
		t.Fatalf("before the step: %v", err)
	}
	off.Store(int64(-step))
	start := time.Now()
	f.mutate(5)
	var during []time.Duration
	for time.Since(start) < scale(90*time.Second, 5*time.Minute) {
		d, err := f.probe(limit)
		if err != nil {
			t.Errorf("%v after the step: %v", time.Since(start).Round(time.Second), err)
			break
		}
		during = append(during, d)
		time.Sleep(scale(3*time.Second, 20*time.Second))
	}
	if *faultLong {
		f.mutStop()
		<-f.mutDone
		f.waitWatermarkPastLastChange(3 * time.Minute)
	}
	f.quiesce()
	f.watermarkNotAhead(simNow())
	n := f.check()
	jumps := f.clockJumps()
	if !slices.ContainsFunc(jumps, func(s string) bool { return strings.Contains(s, `decision="rewound"`) }) {
		t.Errorf("the clock set back was not confirmed: clock jumps %v", jumps)
	}
	verdict := "0 lost, 0 doubled, 0 unsound"
	if t.Failed() {
		verdict = "FAILED (see above)"
	}
	t.Logf("the service's clock set back %v for good, %d changes, %d events checked: %s; detection delay before %v, after the step max %v (median %v, %d probes); clock jumps %v",
		step, len(f.sim.History()), n, verdict, before.Round(time.Millisecond), maxDur(during).Round(time.Millisecond),
		median(during).Round(time.Millisecond), len(during), jumps)
}

package faults

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/plentysim"
)

// realLimits are the service's default limits (166,000 reading calls a
// day, 200 per short period); realEnv the default configuration but for
// the delays the issue was reported with (interval 1s, settle 2s, overlap
// 3s) and the default call share.
var (
	realLimits = plentysim.Limits{LongLimit: 166000}
	realEnv    = []string{"WATCHER_POLL_INTERVAL=1s", "WATCHER_SETTLE=2s", "WATCHER_OVERLAP=3s", "WATCHER_CALL_SHARE=0.25"}
)

// addOrders generates n more orders and records them as initial states.
func (f *faultEnv) addOrders(n int, from, to time.Time) []plentysim.Order {
	before := len(f.sim.Orders())
	f.sim.Generate(n, from, to)
	added := f.sim.Orders()[before:]
	for _, o := range added {
		f.initial[o.ID] = o
	}
	return added
}

// waitEvent waits for the first event on subject and returns when it came.
func (f *faultEnv) waitEvent(subject string, limit time.Duration) (time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit+5*time.Second)
	defer cancel()
	stream, _ := f.stream(ctx)
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return time.Time{}, err
	}
	if _, err := cons.Next(jetstream.FetchMaxWait(limit)); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}

// TestFaultBulkSecondDefaultConfig: with the default configuration
// (WATCHER_KEYSET=auto, 250 a page, 4 pages a slice) and the real limits, a
// batch job sets 1,200 orders in one second, then a workflow changes one
// of them per search call, so that the second never verifies by offset.
// An unrelated order's change is published promptly, and in the end every
// change is.
func TestFaultBulkSecondDefaultConfig(t *testing.T) {
	f := newFaultEnv(t, plentysim.Config{Limits: realLimits}, realEnv...)
	bulk := f.addOrders(1200, time.Now().Add(-47*time.Hour), time.Now().Add(-2*time.Minute))
	f.start()
	waitSynced(t, f.addr)
	for _, o := range bulk {
		if _, err := f.sim.SetStatus(o.ID, "8"); err != nil {
			t.Fatal(err)
		}
	}
	next := 0
	f.sim.SetBeforeSearch(func(*http.Request, int) {
		if next < len(bulk) {
			_, _ = f.sim.SetStatus(bulk[next].ID, "9")
			next++
		}
	})
	time.Sleep(2 * time.Second)
	other := f.sim.Orders()[10] // one of the first 300, not in the bulk
	if _, err := f.sim.SetStatus(other.ID, "11.1"); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	at, err := f.waitEvent(fmt.Sprintf("orders.status_changed.*.11_1.%d", other.ID), 30*time.Second)
	if err != nil {
		t.Fatalf("the unrelated order's change was not published while the bulk was worked through: %v\n%s", err, tail(f.logs.String(), 3000))
	}
	latency := at.Sub(changed)
	// interval + settle is 3 s; the bulk second costs a few keyset calls.
	if latency > 15*time.Second {
		t.Errorf("the unrelated order's change took %v to be published", latency)
	}
	f.sim.SetBeforeSearch(nil)
	f.quiesce()
	n := f.check()
	_, m := get("http://" + f.addr + "/metrics")
	t.Logf("unrelated change published after %v; %d workflow changes during the bulk; %v keyset slices; %d events checked",
		latency.Round(time.Millisecond), next, metricValue(m, "orderwatch_keyset_slices_total"), n)
}

// TestFaultDateAhead: the service's Date header says 2 h ahead for a few
// seconds: the watcher distrusts it, counts a clock problem, and every
// change, during and after, is published.
func TestFaultDateAhead(t *testing.T) {
	f := newFaultEnv(t, plentysim.Config{Limits: realLimits}, realEnv...)
	f.start()
	waitSynced(t, f.addr)
	f.mutate(5)
	time.Sleep(2 * time.Second)
	f.sim.SetFaults(plentysim.Faults{DateSkew: 2 * time.Hour})
	time.Sleep(4 * time.Second)
	f.sim.SetFaults(plentysim.Faults{})
	time.Sleep(3 * time.Second)
	f.quiesce()
	n := f.check()
	_, m := get("http://" + f.addr + "/metrics")
	if v := metricValue(m, "orderwatch_clock_problems_total"); v < 1 {
		t.Errorf("orderwatch_clock_problems_total %v after a Date 2 h ahead", v)
	}
	if wm := time.Unix(int64(metricValue(m, "orderwatch_watermark_timestamp_seconds")), 0); wm.After(time.Now()) {
		t.Errorf("the watermark %v is ahead of the service's clock", wm)
	}
	t.Logf("Date 2 h ahead for 4 s: %d events checked", n)
}

// TestFaultDailyQuotaSpent: another integration spends the whole daily
// quota; the service answers 429 with a Retry-After of many hours. No call
// is made before it, one log line names its end, /readyz ("paused until
// T: daily quota spent") and the metric name it, and SIGTERM still ends the wait at once.
func TestFaultDailyQuotaSpent(t *testing.T) {
	f := newFaultEnv(t, plentysim.Config{Limits: realLimits}, realEnv...)
	f.start()
	waitSynced(t, f.addr)
	f.sim.ConsumeQuota("demo", realLimits.LongLimit)
	base := "http://" + f.addr
	var body string
	waitFor(t, "/readyz to name the wait", 15*time.Second, func() bool {
		code, b := get(base + "/readyz")
		body = b
		return code == http.StatusServiceUnavailable && strings.Contains(b, "paused until") && strings.Contains(b, "daily quota spent")
	})
	_, m := get(base + "/metrics")
	until := time.Unix(int64(metricValue(m, "orderwatch_throttle_blocked_until_timestamp_seconds")), 0)
	if time.Until(until) < 2*time.Hour {
		t.Errorf("blocked until %v: the service asked to wait until its daily period resets (hours)", until)
	}
	calls := f.sim.Stats().SearchCalls
	time.Sleep(3 * time.Second)
	st := f.sim.Stats()
	if st.CallsWhileBlocked != 0 || st.SearchCalls != calls {
		t.Errorf("%d calls while the wait was pending, %d searches during it", st.CallsWhileBlocked, st.SearchCalls-calls)
	}
	f.mu.Lock()
	logs := f.logs.String()
	f.mu.Unlock()
	if n := strings.Count(logs, "no call before the time it names"); n != 1 {
		t.Errorf("%d log lines about the wait; want one:\n%s", n, tail(logs, 3000))
	}
	err, took := f.stop()
	if err != nil || took > 5*time.Second {
		t.Errorf("SIGTERM during the wait: exit %v after %v", err, took)
	}
	t.Logf("/readyz: %s; SIGTERM ended the wait in %v", strings.TrimSpace(body), took.Round(time.Millisecond))
}

// TestFaultFirstSyncReady: during a first sync that makes progress,
// /readyz answers 200 "first sync in progress: N%", and the progress
// metrics move before it ends.
func TestFaultFirstSyncReady(t *testing.T) {
	f := newFaultEnv(t, plentysim.Config{Limits: realLimits}, realEnv...)
	f.addOrders(20000, time.Now().Add(-29*24*time.Hour), time.Now().Add(-time.Minute))
	f.start()
	base := "http://" + f.addr
	var body, m string
	waitFor(t, "/readyz to say the first sync is in progress", 30*time.Second, func() bool {
		code, b := get(base + "/readyz")
		body = b
		_, m = get(base + "/metrics")
		ratio := metricValue(m, "orderwatch_first_sync_progress_ratio")
		return code == http.StatusOK && strings.Contains(b, "first sync in progress") && ratio > 0 && ratio < 1
	})
	ratio := metricValue(m, "orderwatch_first_sync_progress_ratio")
	scanned := metricValue(m, "orderwatch_orders_scanned_total")
	lag := metricValue(m, "orderwatch_watermark_lag_seconds")
	if ratio <= 0 || ratio >= 1 || scanned <= 0 || lag <= 0 {
		t.Errorf("during the first sync: progress ratio %v, orders scanned %v, watermark lag %v; want all moving", ratio, scanned, lag)
	}
	waitFor(t, "the first sync to end", 60*time.Second, func() bool {
		code, b := get(base + "/readyz")
		return code == http.StatusOK && strings.TrimSpace(b) == "ok"
	})
	_, m = get(base + "/metrics")
	if v := metricValue(m, "orderwatch_first_sync_progress_ratio"); v != 1 {
		t.Errorf("progress ratio %v after the first sync", v)
	}
	t.Logf("during the first sync: %q, ratio %.2f, %v orders scanned, lag %v s", strings.TrimSpace(body), ratio, scanned, lag)
}

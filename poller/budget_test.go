package poller_test

import (
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/poller"
)

// The real service's default limits.
const (
	dailyLimit = 166000
	shortPace  = 10.0 // calls a second: 200 per 20 s short period
)

// dayResult is what a simulated day of sweeps did.
type dayResult struct {
	calls          int           // all calls of the day
	maxGap         time.Duration // longest time between two sweeps
	afterFirst     time.Duration // the gap after the first sweep
	stretched      int           // sweeps whose gap was longer than the interval
	reason         string        // one reason given
	firstSyncTook  time.Duration
	sweeps         int
	maxInAnyWindow int // most calls in any 24 h window (the day starts with the first sync)
}

// simulateDay runs sweeps for 24 h on a fake clock against a service that
// reports its long period as only we use it: the first sweep costs first
// calls, every later one cost calls; a sweep takes its calls at the short
// period's pace.
func simulateDay(interval time.Duration, share float64, first, cost int) dayResult {
	return simulateDays(interval, share, first, cost, 0, 1)
}

// simulateDays is simulateDay over days days (the service's quota resets
// at midnight); every 5 minutes a probe costs probeExtra more calls after
// a sweep (charged apart, see poller.Timings and Run; 0: none). The result
// is the last day's.
func simulateDays(interval time.Duration, share float64, first, cost, probeExtra, days int) dayResult {
	start := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	last := start.Add(time.Duration(days-1) * 24 * time.Hour)
	end := last.Add(24 * time.Hour)
	b := poller.NewBudget(share)
	used := 0 // the service's count of the day
	day := start
	th := func(now time.Time) plenty.Throttle {
		return plenty.Throttle{Long: plenty.Period{Present: true, Limit: dailyLimit, CallsLeft: max(dailyLimit-used, 0), Decay: day.Add(24 * time.Hour).Sub(now)}}
	}
	var r dayResult
	var probed time.Time
	now := start
	for i := 0; now.Before(end); i++ {
		if !now.Before(day.Add(24 * time.Hour)) {
			day, used = now.Truncate(24*time.Hour), 0
		}
		c := cost
		if i == 0 {
			c = first
		}
		extra := 0 // a probe's slice, charged apart from the sweep's cost
		if probeExtra > 0 && now.Sub(probed) >= 5*time.Minute {
			extra, probed = probeExtra, now
		}
		counted := !now.Before(last)
		took := time.Duration(float64(c+extra) / shortPace * float64(time.Second))
		if i == 0 {
			r.firstSyncTook = took
		}
		b.Remaining(now, th(now)) // the sweep starts: the service's view before it
		used += c + extra
		if counted {
			r.calls += c + extra
		}
		done := now.Add(took)
		b.Spend(done, c, th(done))
		b.Charge(done, extra, th(done))
		gap, why := b.Gap(done, interval, th(done))
		next := now.Add(max(gap, took))
		if d := next.Sub(now); d > r.maxGap && i > 0 && counted {
			r.maxGap = d
		}
		if i == 0 {
			r.afterFirst = next.Sub(done)
		}
		pace, _ := b.Pace(interval)
		if gap > pace && counted {
			r.stretched++
			r.reason = why
		}
		if counted {
			r.sweeps++
		}
		now = next
	}
	r.maxInAnyWindow = r.calls
	return r
}

// TestBudgetSimulatedDay proves the daily bound on a fake clock: whatever
// the sweeps cost, the calls of a day stay within share x limit plus the
// bucket (an hour of refill), a first sync of 1,000,000 orders runs at the
// short period's pace and the next sweep starts on time, and no gap grows
// to hours.
func TestBudgetSimulatedDay(t *testing.T) {
	share := 0.25
	bound := int(share * dailyLimit * 25 / 24) // a day's share + an hour's burst (rounded down)
	for _, tt := range []struct {
		name        string
		interval    time.Duration
		first, cost int
		// the gap after the first sweep may not exceed the interval
		onTime bool
	}{
		{"idle, interval 30s", 30 * time.Second, 1, 1, true},
		{"idle, interval 1s", time.Second, 1, 1, true},
		{"busy: 5 calls a sweep, interval 1s", time.Second, 5, 5, true},
		{"busy: 40 calls a sweep, interval 30s", 30 * time.Second, 40, 40, true},
		{"first sync of 100,000 orders, then idle at 1s", time.Second, 400, 1, true},
		{"first sync of 1,000,000 orders, then idle at 30s", 30 * time.Second, 4000, 1, true},
		{"first sync of 1,000,000 orders, then busy at 1s", time.Second, 4000, 3, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := simulateDay(tt.interval, share, tt.first, tt.cost)
			t.Logf("%d calls in 24 h (bound %d), %d sweeps, %d stretched, longest gap %v, gap after the first sweep %v (it took %v); %s",
				r.calls, bound, r.sweeps, r.stretched, r.maxGap, r.afterFirst.Round(time.Millisecond), r.firstSyncTook, r.reason)
			if r.calls > bound {
				t.Errorf("%d calls in a day: more than share x limit + an hour's burst = %d", r.calls, bound)
			}
			if tt.onTime && r.afterFirst > tt.interval {
				t.Errorf("the sweep after the first started %v after it ended; want within the interval %v", r.afterFirst, tt.interval)
			}
			// Never hours of silence: at worst the pace of a tenth of the
			// refill for the median sweep.
			if limit := time.Duration(float64(max(tt.cost, 1)) / (0.1 * share * dailyLimit / 86400) * float64(time.Second)); r.maxGap > max(limit, tt.interval)+time.Second {
				t.Errorf("longest gap %v; want at most %v", r.maxGap, limit)
			}
		})
	}
}

func TestBudgetGap(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	long := func(left int, decay time.Duration) plenty.Throttle {
		return plenty.Throttle{Long: plenty.Period{Present: true, Limit: dailyLimit, CallsLeft: left, Decay: decay}}
	}
	for _, tt := range []struct {
		name    string
		spent   int
		th      plenty.Throttle
		atLeast time.Duration
		atMost  time.Duration
		reason  string
	}{
		{"no headers: nothing is known, nothing stretches", 4000, plenty.Throttle{}, 30 * time.Second, 30 * time.Second, ""},
		{"calls left unreadable (-1): nothing stretches", 1000, long(-1, 0), 30 * time.Second, 30 * time.Second, ""},
		{"one expensive sweep with budget left: on time", 800, long(150000, 20*time.Hour), 30 * time.Second, 30 * time.Second, ""},
		{"others spent the day: 1000 left for 10h, our share paces", 0, long(1000, 10*time.Hour), 140 * time.Second, 150 * time.Second, "calls left"},
		{"nothing left: sweep again when the period resets", 0, long(0, time.Hour), time.Hour, time.Hour + time.Second, "calls left"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := poller.NewBudget(0.25)
			b.Remaining(now, tt.th)
			b.Spend(now, tt.spent, tt.th)
			gap, why := b.Gap(now, 30*time.Second, tt.th)
			if gap < tt.atLeast || gap > tt.atMost || !strings.Contains(why, tt.reason) {
				t.Errorf("gap %v (%q); want %v..%v, reason with %q", gap, why, tt.atLeast, tt.atMost, tt.reason)
			}
		})
	}
}

// TestBudgetSlowsSmoothly: as the bucket empties the gap grows step by
// step, never jumping from the interval to a long silence.
func TestBudgetSlowsSmoothly(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	th := plenty.Throttle{Long: plenty.Period{Present: true, Limit: dailyLimit, CallsLeft: -1}}
	b := poller.NewBudget(0.25)
	b.Remaining(now, th)
	prev := time.Second
	for i := range 10000 {
		b.Spend(now, 1, th)
		gap, _ := b.Gap(now, time.Second, th)
		if gap < prev || gap > prev*3/2+time.Second {
			t.Fatalf("sweep %d: gap %v after %v: want a gap that grows smoothly", i, gap, prev)
		}
		prev = gap
		now = now.Add(gap)
	}
	if prev < 2*time.Second || prev > 3*time.Second {
		t.Errorf("steady gap %v: want one call per refill (0.25 x 166000 a day = one per 2.08 s)", prev)
	}
}

// TestBudgetSimulatedDayDerived proves the long-run bound of the derived
// interval (no WATCHER_POLL_INTERVAL) on a fake clock: idle or busy, with
// a first sync and with a probe every 5 minutes, the first day spends at
// most share x limit and the bucket (an hour's refill), and once the
// bucket has settled (the third day) the sweeps' calls of a day stay
// within share x limit (41,500 at the defaults); an idle shop is polled
// every 2.08 s.
func TestBudgetSimulatedDayDerived(t *testing.T) {
	share := 0.25
	bound := int(share * dailyLimit)
	for _, tt := range []struct {
		name                    string
		first, cost, probeExtra int
		// the steady gap of the median sweep: cost / (share x limit / 86400)
		wantSweepsAtLeast int
	}{
		{"idle", 1, 1, 0, bound - 10},
		{"idle, probes of 1 call", 1, 1, 1, bound - 300},
		{"busy: 3 calls a sweep, probes of 48", 1, 3, 48, 0},
		{"busy: 40 calls a sweep", 40, 40, 0, bound/40 - 10},
		{"first sync of 1,000,000 orders, then 2 calls a sweep with probes of 10", 4000, 2, 10, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, days := range []int{1, 3} {
				r := simulateDays(0, share, tt.first, tt.cost, tt.probeExtra, days)
				t.Logf("day %d: %d calls (share %d), %d sweeps, %d stretched, longest gap %v; %s", days, r.calls, bound, r.sweeps, r.stretched, r.maxGap, r.reason)
				if days == 1 {
					// The first day may spend the bucket (an hour's refill) on top.
					if limit := int(share * dailyLimit * 25 / 24); r.calls > limit {
						t.Errorf("first day: %d calls; want at most share x limit + an hour's burst = %d", r.calls, limit)
					}
					continue
				}
				// A sweep's calls count on the day it starts: one sweep
				// at the day's edge may fall on either side.
				if edge := tt.cost + tt.probeExtra; r.calls > bound+edge {
					t.Errorf("day %d: %d calls; want at most share x limit = %d (+ %d, one sweep at the day's edge)", days, r.calls, bound, edge)
				}
				if r.sweeps < tt.wantSweepsAtLeast {
					t.Errorf("day %d: %d sweeps; want at least %d (the budget's pace)", days, r.sweeps, tt.wantSweepsAtLeast)
				}
			}
		})
	}
}

// TestBudgetPace: the interval in force without WATCHER_POLL_INTERVAL.
func TestBudgetPace(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	b := poller.NewBudget(0.25)
	if d, src := b.Pace(0); d != poller.DefaultGap || src != poller.SourceDefault {
		t.Errorf("before the daily limit is known: %v (%s); want %v (default)", d, src, poller.DefaultGap)
	}
	th := plenty.Throttle{Long: plenty.Period{Present: true, Limit: dailyLimit, CallsLeft: -1}}
	b.Remaining(now, th)
	if d, src := b.Pace(0); d != 2082*time.Millisecond || src != poller.SourceBudget {
		t.Errorf("0.25 x 166,000 a day, one-call sweeps: %v (%s); want 2.082s (budget)", d, src)
	}
	for range 5 {
		b.Spend(now, 4, th)
	}
	if d, _ := b.Pace(0); d != 8328*time.Millisecond {
		t.Errorf("four-call sweeps: %v; want 8.328s", d)
	}
	if d, src := b.Pace(30 * time.Second); d != 30*time.Second || src != poller.SourceExplicit {
		t.Errorf("explicit 30s: %v (%s)", d, src)
	}
	if gap, _ := b.Gap(now, 0, th); gap != 8328*time.Millisecond {
		t.Errorf("gap with a full bucket: %v; want the pace 8.328s", gap)
	}
}

// simulateHours runs derived-pace sweeps for days days against the
// service's default limits: sweeps that cost 1, 1 and 2 calls in turn (a
// busy shop at a page's edge: the median 1, the mean 1.33), every 50th a
// retry more, and every 5 minutes a probe of 48 pages read one page after
// each sweep (as Run does). It returns the calls of every hour and the
// longest gap between two sweeps. drained starts from a restored budget
// with an empty bucket (a restart on a day the bucket was spent).
func simulateHours(days int, drained bool) (hours []int, maxGap time.Duration) {
	start := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	b := poller.NewBudget(0.25)
	if drained {
		b.Restore(poller.BudgetState{Level: 0, At: start, Limit: dailyLimit}, start)
	}
	th := plenty.Throttle{Long: plenty.Period{Present: true, Limit: dailyLimit, CallsLeft: -1}}
	hours = make([]int, days*24)
	probeLeft, probed := 0, start
	now := start
	for i := 0; now.Before(start.Add(time.Duration(days) * 24 * time.Hour)); i++ {
		b.Remaining(now, th)
		c := []int{1, 1, 2}[i%3]
		if i%50 == 49 {
			c++
		}
		if now.Sub(probed) >= 5*time.Minute {
			probeLeft, probed = 48, now
		}
		extra := 0
		if probeLeft > 0 {
			extra, probeLeft = 1, probeLeft-1
		}
		hours[int(now.Sub(start)/time.Hour)] += c + extra
		done := now.Add(time.Duration(float64(c+extra) / shortPace * float64(time.Second)))
		b.Spend(done, c, th)
		b.Charge(done, extra, th)
		gap, _ := b.Gap(done, 0, th)
		if i > 0 {
			maxGap = max(maxGap, gap)
		}
		now = now.Add(gap)
	}
	return hours, maxGap
}

// TestBudgetDerivedEveryHourWithinTheShare: at the derived pace a busy
// shop's sweeps spend the share and no more in every hour, from the first
// (the bucket full: it is for a first sync or a catch-up, not for the
// sweeps' steady cost) to the third day, probes, retries and sweeps that
// cost more than the median included (within 1%: sweeps at the hour's
// edges); and from a drained bucket too, where the sweeps slow down by a
// tenth at most.
func TestBudgetDerivedEveryHourWithinTheShare(t *testing.T) {
	perHour := 0.25 * dailyLimit / 24
	var full time.Duration
	for _, drained := range []bool{false, true} {
		hours, maxGap := simulateHours(3, drained)
		worst := 0
		for h, n := range hours {
			worst = max(worst, n)
			// Sweeps at the hour's edges, and the bucket's top (a few
			// sweeps' cost) spent or kept: 1%.
			if float64(n) > perHour*1.01 {
				t.Errorf("drained %v: hour %d spent %d calls; want at most the share's %.0f", drained, h, n, perHour)
			}
		}
		t.Logf("drained %v: most calls in an hour %d (share %.0f), first hour %d, last %d, longest gap %v", drained, worst, perHour, hours[0], hours[len(hours)-1], maxGap)
		if !drained {
			full = maxGap
		} else if maxGap > full*115/100 {
			t.Errorf("from a drained bucket the longest gap is %v, from a full one %v: want at most a tenth or so slower", maxGap, full)
		}
	}
}

// TestBudgetPaceFollowsABusyHour: after hours of one-call sweeps, sweeps
// that cost two calls for good pace the sweeps from the third of them (the
// long-run mean alone would take minutes to follow, spending the bucket
// meanwhile); a probe's slices between sweeps slow the pace as they cost.
func TestBudgetPaceFollowsABusyHour(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	th := plenty.Throttle{Long: plenty.Period{Present: true, Limit: dailyLimit, CallsLeft: -1}}
	b := poller.NewBudget(0.25)
	b.Remaining(now, th)
	for range 1000 {
		b.Spend(now, 1, th)
	}
	for range 3 {
		b.Spend(now, 2, th)
	}
	if d, _ := b.Pace(0); d != 4164*time.Millisecond {
		t.Errorf("two-call sweeps after hours of one-call sweeps: pace %v; want 4.164s from the third", d)
	}
	before, _ := b.Pace(0)
	for range 256 { // minutes of sweeps
		b.Spend(now, 2, th)
		b.Charge(now, 1, th) // a probe's slice after each sweep
	}
	if d, _ := b.Pace(0); d < before*5/4 {
		t.Errorf("with a probe's slice after every sweep the pace is %v, before %v: want the probe's calls paced too", d, before)
	}
}

// TestBudgetExtraOnFewSweeps: a process that has measured one sweep's
// cost (restored from a state file written just after a first sync, as
// TestFreshnessHostile's drained restart) counts a second look's one call
// after a one-call sweep as part of the sweeps it serves, not as every
// sweep's second call: before, the long-run mean of two cycles became 1.5
// (of one, 2), and the sweeps of a busy shop's first minute after such a
// restart went 3.1-4.6 s apart.
func TestBudgetExtraOnFewSweeps(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	th := plenty.Throttle{Long: plenty.Period{Present: true, Limit: dailyLimit, CallsLeft: -1}}
	b := poller.NewBudget(0.25)
	b.Restore(poller.BudgetState{Level: 0, At: now, Limit: dailyLimit, Costs: []int{1, 1, 1}, Mean: 1, Cycles: 1}, now)
	b.Spend(now, 1, th)
	b.Charge(now, 1, th) // a one-call second look after it
	if d, _ := b.Pace(0); d > 3*time.Second {
		t.Errorf("one second look after the second sweep measured: pace %v; want at most 3 s (one-call sweeps: 2.08 s)", d)
	}
}

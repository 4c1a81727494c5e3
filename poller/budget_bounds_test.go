package poller_test

import (
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/poller"
)

// TestGapNeverPastADay (review): the long (daily) period resets within a
// day, so a -Decay of months (a bad header) never spaces the sweeps more
// than a day apart, with no calls left or with few.
func TestGapNeverPastADay(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	for _, left := range []int{0, 1, 100} {
		b := poller.NewBudget(0.25)
		th := plenty.Throttle{Long: plenty.Period{Present: true, Limit: 166000, CallsLeft: left, Decay: 9999999 * time.Second}}
		b.Spend(now, 1, th)
		if gap, why := b.Gap(now, 30*time.Second, th); gap > 24*time.Hour+time.Minute {
			t.Errorf("%d calls left, a -Decay of months: next sweep in %v (%s); want at most a day", left, gap, why)
		}
	}
}

// TestRestoredNextSweepWithinADay (review): a budget record that holds the
// next sweep months ahead (a record of a bad header, or a hand-edited
// file) delays the first sweep of a restarted process by a day at most.
func TestRestoredNextSweepWithinADay(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	b := poller.NewBudget(0.25)
	b.Restore(poller.BudgetState{Level: 10, At: now, Limit: 166000, Next: now.Add(100 * 24 * time.Hour), Gap: 100 * 24 * time.Hour}, now)
	if next := b.NotBefore(); next.Sub(now) > 24*time.Hour+time.Minute {
		t.Errorf("first sweep after the restart at %v, %v from now; want within a day", next, next.Sub(now))
	}
}

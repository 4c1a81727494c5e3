package poller

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
)

// TestBudgetAbsorbsOthersSpendAfterItsRefill: a running budget, full
// an hour ago and idle since, is told the group's record in which x took
// 1,000 calls just now: it may spend 1,000 calls less than the full
// bucket now. (Taken before the hour's refill, the calls were paid back
// by a refill the full bucket never held.)
func TestBudgetAbsorbsOthersSpendAfterItsRefill(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	full := plenty.Throttle{Long: plenty.Period{Present: true, Limit: 166000, CallsLeft: -1}}
	b := NewBudget(0.25)
	b.Take(t0, 1, full)
	start, _ := b.Remaining(t0, full)
	now := t0.Add(time.Hour)
	group := b.Snapshot()
	group.Spent = map[string]Spend{"x": {Calls: 1000, At: now}}
	raw, _ := json.Marshal(group)
	b.Snapshot().AbsorbGroup(raw)
	if got := mustRemaining(b, now, full); got > b.capacity()-1000+1e-6 {
		t.Errorf("level %.0f after an idle hour (from %.0f) and x's 1,000 calls just now, want at most %.0f", got, start, b.capacity()-1000)
	}
}

func mustRemaining(b *Budget, now time.Time, th plenty.Throttle) float64 {
	level, _ := b.Remaining(now, th)
	return level
}

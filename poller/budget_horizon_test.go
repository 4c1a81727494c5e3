package poller

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
)

// TestBudgetAbsorbsNoCountItsLevelHolds: a budget restored from a record
// whose level counts an old tenure's 5,000 calls (taken just inside the
// record's 25-hour horizon, just outside it at the restore) is told the
// group's record, written a little after the one it restored, that still
// lists that count and 10 calls of another replica: it takes the 10
// calls, not the 5,000 again (its level already counts them).
func TestBudgetAbsorbsNoCountItsLevelHolds(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	const daily = dayDaily
	full := unlimitedDay()
	old := Spend{Calls: 5000, At: t0.Add(-spentHorizon + time.Minute)}
	capacity := 0.25 * daily / 24
	rec := BudgetState{Level: capacity - 100, At: t0, Limit: daily, Costs: []int{1, 1, 1}, Mean: 1, Cycles: 3,
		Spent: map[string]Spend{"old": old, "y": {Calls: 100, At: t0}}}
	now := t0.Add(2 * time.Minute)
	b := NewBudget(0.25)
	b.Restore(rec, now)
	before := mustRemaining(b, now, full)

	group := rec
	group.At = t0.Add(30 * time.Second)
	group.Level -= 10
	group.Spent = map[string]Spend{"old": old, "y": {Calls: 100, At: t0}, "x": {Calls: 10, At: group.At}}
	raw, _ := json.Marshal(group)
	b.Snapshot().AbsorbGroup(raw)
	if got := mustRemaining(b, now, full); got < before-10-1e-6 {
		t.Errorf("level %.0f after x's 10 calls absorbed (from %.0f): the old tenure's 5,000 calls its level counted taken again", got, before)
	}
}

// unlimitedDay is what the service says of its daily quota (166,000 calls)
// when the calls left are not read.
func unlimitedDay() plenty.Throttle {
	return plenty.Throttle{Long: plenty.Period{Present: true, Limit: dayDaily, CallsLeft: -1}}
}

package poller

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
)

// restoredLevel is the level a budget restored from the record raw has at
// now (what a process that continues it may spend).
func restoredLevel(t *testing.T, raw json.RawMessage, now time.Time) float64 {
	t.Helper()
	var s BudgetState
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("budget record %s: %v", raw, err)
	}
	b := NewBudget(0.25)
	b.Restore(s, now)
	level, _ := b.Remaining(now, plenty.Throttle{})
	return level
}

// TestMergeBudgetFromAnOlderLevelRefundsNothing: a's record is the full
// bucket an hour ago; b continued the same budget (a's checkpoint) and
// spent 1,000 calls at the end of the hour: its record (not marked as the
// later state of a's: a standby wrote the group's value last) is 1,000
// below full now. Merged either way, the result may spend no more than
// b's: a's level of an hour ago as the base, less b's 1,000 calls, plus
// the hour's refill (which the full bucket never held), refunds them.
func TestMergeBudgetFromAnOlderLevelRefundsNothing(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	const daily = 166000
	capacity := 0.25 * daily / 24
	t1 := t0.Add(time.Hour)
	rec := func(level float64, at time.Time, spent map[string]Spend) json.RawMessage {
		b, _ := json.Marshal(BudgetState{Level: level, At: at, Limit: daily, Costs: []int{1, 1, 1}, Mean: 1, Cycles: 3, Spent: spent})
		return b
	}
	a := rec(capacity, t0, map[string]Spend{"a": {Calls: 100, At: t0}})
	b := rec(capacity-1000, t1, map[string]Spend{"a": {Calls: 100, At: t0}, "b": {Calls: 1000, At: t1}})
	want := restoredLevel(t, b, t1)
	for _, c := range []struct {
		name       string
		own, group json.RawMessage
	}{{"a's own, b's the group's", a, b}, {"b's own, a's the group's", b, a}} {
		m, err := MergeBudget(c.own, c.group, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, at := range []time.Time{t1, t1.Add(10 * time.Minute)} {
			if got, limit := restoredLevel(t, m, at), restoredLevel(t, b, at); got > limit+1e-6 {
				t.Errorf("%s: merged %s, at %v it may spend %.0f calls, b's record %.0f: b's spend refunded", c.name, m, at.Sub(t1), got, limit)
			}
		}
	}
	if want > capacity-999 {
		t.Fatalf("b's record restores to %.0f, want %.0f", want, capacity-1000)
	}
}

package poller

import (
	"encoding/json"
	"testing"
	"time"
)

// TestMergeBudgetWithAnUncountedRecordLetsGo: the group's record is an
// earlier version's (no counts), in debt by 5,000 calls after a first
// sync. The active restores it and sweeps for six hours at less than the
// refill, writing its record into the group's after every sweep: its
// budget is full again, and so must the group's record be (what a
// takeover after the active's kill restores). Merged to the lower level
// without counts at every write, the record stood at the earlier
// version's debt for as long as the tenure lasted: the takeover started
// 5,000 calls in debt, six hours of refill lost (the sweeps at a tenth of
// their pace for an hour and more).
func TestMergeBudgetWithAnUncountedRecordLetsGo(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	const daily = dayDaily
	th := unlimitedDay()
	group, _ := json.Marshal(BudgetState{Level: -5000, At: t0, Limit: daily, Costs: []int{1, 1, 1}, Mean: 1, Cycles: 3})
	var s BudgetState
	_ = json.Unmarshal(group, &s)
	a := NewBudget(0.25)
	a.Restore(s, t0)
	now := t0
	for now.Before(t0.Add(6 * time.Hour)) {
		now = now.Add(10 * time.Second)
		a.Spend(now, 1, th)
		own, _ := json.Marshal(a.Snapshot())
		m, err := MergeBudget(own, group, false)
		if err != nil {
			t.Fatal(err)
		}
		group = m
	}
	want := mustRemaining(a, now, th)
	if got := restoredLevel(t, group, now); got < want-1 {
		t.Errorf("after six hours the active's budget holds %.0f calls, the group's record %.0f (%s): a takeover starts in debt again", want, got, group)
	}
}

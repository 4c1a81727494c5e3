package replica_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/poller"
)

// TestTakeoverKeepsItsUnsentSpendUnderALaterGroupBudget: b's state file
// holds calls b spent that never reached the group (its writes failed:
// UnsentRecord); a, the active, wrote its budget to the group after its
// last checkpoint (a later state of the checkpoint's: it replaces what b
// restored). b takes over from that checkpoint: its budget holds a's
// calls and its own, never fewer than it spent (a takeover right after
// another one meets this too: the earlier one's limits' writer writes
// after the tenure's first checkpoint).
func TestTakeoverKeepsItsUnsentSpendUnderALaterGroupBudget(t *testing.T) {
	t.Parallel()
	g := newGroup(t)
	a := g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	b := g.startFaulty("b", &pipeline{}, func(f *faultyKV) { f.failWrites.Store(1 << 20) })
	now := time.Now()
	mine := poller.BudgetState{Level: 960, At: now, Limit: 1000, Spent: map[string]poller.Spend{"b-tenure": {Calls: 40, At: now}}}
	if err := b.rep.Records(b.store).SaveRecord(poller.BudgetRecord, mine); err != nil {
		t.Fatal(err)
	}
	theirs := poller.BudgetState{Level: 900, At: now, Limit: 1000, Spent: map[string]poller.Spend{"a-tenure": {Calls: 100, At: now}}}
	if err := a.rep.Records(a.store).SaveRecord(poller.BudgetRecord, theirs); err != nil {
		t.Fatal(err)
	}
	if v := g.limits(); !strings.Contains(v, "a-tenure") || strings.Contains(v, "b-tenure") {
		t.Fatalf("precondition: the group's limits %s; want a's budget, not b's", v)
	}
	a.kill()
	waitFor(t, "b active", b.working)
	var got poller.BudgetState
	if found, err := b.store.LoadRecord(poller.BudgetRecord, &got); err != nil || !found {
		t.Fatalf("b's budget: %v %v", found, err)
	}
	if got.Spent["a-tenure"].Calls != 100 || got.Spent["b-tenure"].Calls != 40 || got.Level > 860 {
		b, _ := json.Marshal(got)
		t.Errorf("b's budget after its takeover: %s; want a's 100 calls and b's own 40 taken (level 860 at most)", b)
	}
}

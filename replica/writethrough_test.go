package replica_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/replica"
)

// TestWaitReachesTheGroupAfterAFailedWrite: one write of the group's
// limits fails (a NATS timeout): the wait whose save it was, and a wait
// saved right after a failed save of the budget, are in the group's
// limits when their save returns, before the active's next call.
func TestWaitReachesTheGroupAfterAFailedWrite(t *testing.T) {
	g := newGroup(t)
	bk, kv := g.faultyBuckets()
	g.configure = func(_ string, c *replica.Config) { c.Buckets = bk }
	a := g.start("a", &pipeline{})
	waitFor(t, "a active", a.working)
	recs := a.rep.Records(a.store)
	save := func(why string) {
		t.Helper()
		w := plenty.Wait{Until: time.Now().Add(time.Minute), Reason: plenty.WaitThrottled, Why: why, Measured: time.Now(), Announced: time.Minute}
		if err := plenty.SaveWait(recs, w); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(g.limits(), why) {
			t.Errorf("the wait %q is not in the group's limits when its save returns", why)
		}
	}
	kv.failWrites.Store(1)
	save("429 whose write failed once")

	kv.failWrites.Store(1)
	if err := recs.SaveRecord(poller.BudgetRecord, poller.BudgetState{Level: 10, At: time.Now(), Limit: 166000}); err != nil {
		t.Fatal(err)
	}
	save("429 after a failed write of the budget")
}

// TestASaveTheGroupHasLeavesNothingUnsent: each save of the budget
// through Records is in the group's limits when the save returns, and the
// state file's UnsentRecord is cleared by that write at once (left for the
// next save, it outlived a kill and was written back at the restart:
// TestAKilledReplicasSentBudgetRefundsNoSpend).
func TestASaveTheGroupHasLeavesNothingUnsent(t *testing.T) {
	g := newGroup(t)
	a := g.start("a", &pipeline{})
	waitFor(t, "a active", a.working)
	recs := a.rep.Records(a.store)
	for i := range 3 {
		s := poller.BudgetState{Level: float64(100 - i), At: time.Now(), Limit: 166000, Spent: map[string]poller.Spend{"a-tenure": {Calls: int64(i + 1), At: time.Now()}}}
		if err := recs.SaveRecord(poller.BudgetRecord, s); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(`"calls":%d`, i+1); !strings.Contains(g.limits(), want) {
			t.Fatalf("save %d: the group's limits %s lack %s when the save returns", i+1, g.limits(), want)
		}
		var unsent map[string]json.RawMessage
		if _, err := a.store.LoadRecord(replica.UnsentRecord, &unsent); err != nil || len(unsent) != 0 {
			t.Errorf("save %d: the state file holds %v unsent (err %v) after the group's write: want none", i+1, unsent, err)
		}
	}
}

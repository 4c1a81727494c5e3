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

// TestASaveWritesTheStateFileOnce: each save of the budget through Records
// is one write of the state file (the record and what the group does not
// have yet, UnsentRecord, in one transaction); the group's write does not
// clear UnsentRecord with a second one (the next save rewrites it). When
// the replica stops, the record is cleared: its restart finds nothing
// unsent.
func TestASaveWritesTheStateFileOnce(t *testing.T) {
	g := newGroup(t)
	a := g.start("a", &pipeline{})
	waitFor(t, "a active", a.working)
	recs := a.rep.Records(a.store)
	before := a.ckpt.saves.Load()
	for i := range 5 {
		s := poller.BudgetState{Level: float64(100 - i), At: time.Now(), Limit: 166000, Spent: map[string]poller.Spend{"a-tenure": {Calls: int64(i + 1), At: time.Now()}}}
		if err := recs.SaveRecord(poller.BudgetRecord, s); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(`"calls":%d`, i+1); !strings.Contains(g.limits(), want) {
			t.Fatalf("save %d: the group's limits %s lack %s when the save returns", i+1, g.limits(), want)
		}
	}
	if n := a.ckpt.saves.Load() - before; n != 0 {
		t.Errorf("5 saves of the budget wrote the state file %d more times (clearing what the group has): want none", n)
	}
	a.stop()
	var unsent map[string]json.RawMessage
	if _, err := a.store.LoadRecord(replica.UnsentRecord, &unsent); err != nil || len(unsent) != 0 {
		t.Errorf("after the stop the state file holds %v unsent (err %v): want none", unsent, err)
	}
}

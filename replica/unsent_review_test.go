package replica_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/replica"
	"github.com/orderwatch/orderwatch/state"
)

// frozenStore is the replica's state file as a kill -9 leaves it: once
// dead, the replica's own writes of records (clearing UnsentRecord, the
// group's limits merged in) are lost. (member.kill stops Run, whose stop
// path still clears UnsentRecord: it is no kill for the state file.)
type frozenStore struct {
	*checkpointStore
	dead atomic.Bool
}

func (s *frozenStore) SaveRecord(name string, v any) error {
	if s.dead.Load() {
		return nil
	}
	return s.checkpointStore.SaveRecord(name, v)
}

func (s *frozenStore) SaveRecords(recs ...state.Record) error {
	if s.dead.Load() {
		return nil
	}
	return s.Store.SaveRecords(recs...)
}

// startFrozen starts the member name on the state file at path with its
// replica's writes behind a frozenStore.
func (g *group) startFrozen(name, path string) (*member, *frozenStore) {
	var f *frozenStore
	g.configure = func(n string, c *replica.Config) {
		if n == name && f == nil {
			f = &frozenStore{checkpointStore: c.Store.(*checkpointStore)}
			c.Store = f
		}
	}
	m := g.startOn(name, path, &pipeline{})
	g.configure = nil
	return m, f
}

// budgetNow is the level a budget restored from the record raw has at
// now (what a process that continues it may spend).
func budgetNow(t *testing.T, raw []byte, now time.Time) float64 {
	t.Helper()
	var s poller.BudgetState
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("budget record %s: %v", raw, err)
	}
	b := poller.NewBudget(0.25)
	b.Restore(s, now)
	level, _ := b.Remaining(now, plenty.Throttle{})
	return level
}

// TestAKilledReplicasSentBudgetRefundsNoSpend: a, the active, saved its
// budget (full, 100 calls) and wrote it to the group, then was killed
// (kill -9: its state file keeps replica.unsent, which the group already
// has). b took over and spent 3,000 calls in a burst an hour ago, after
// four hours at a full bucket: its budget is 458 calls now. Hours later a
// starts again on its file as a standby, and later takes over from b. At
// no moment may the group's budget, or a's once it takes over, be above
// b's: a's old record merged as the base (its level five hours ago with
// all of that refill, the cap ignored) refunds b's burst.
func TestAKilledReplicasSentBudgetRefundsNoSpend(t *testing.T) {
	g := newGroup(t)
	path := filepath.Join(t.TempDir(), "a.db")
	a, frozen := g.startFrozen("a", path)
	waitFor(t, "a active", a.working)
	b := g.start("b", &pipeline{})
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })

	const daily = 166000
	capacity := 0.25 * daily / 24
	now := time.Now()
	before := now.Add(-5 * time.Hour)
	aState := poller.BudgetState{Level: capacity, At: before, Limit: daily, Costs: []int{1, 1, 1}, Mean: 1, Cycles: 3,
		Spent: map[string]poller.Spend{"a-tenure": {Calls: 100, At: before}}}
	if err := a.rep.Records(a.store).SaveRecord(poller.BudgetRecord, aState); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a's budget in the group", func() bool { return strings.Contains(g.limits(), "a-tenure") })
	frozen.dead.Store(true)
	a.kill()
	_ = a.store.Close()

	waitFor(t, "b active", b.working)
	burst := now.Add(-time.Hour)
	bState := poller.BudgetState{Level: capacity - 3000, At: burst, Limit: daily, Costs: []int{1, 1, 1}, Mean: 1, Cycles: 3,
		Spent: map[string]poller.Spend{"a-tenure": {Calls: 100, At: before}, "b-tenure": {Calls: 3000, At: burst}}}
	if err := b.rep.Records(b.store).SaveRecord(poller.BudgetRecord, bState); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b's budget in the group", func() bool { return strings.Contains(g.limits(), "b-tenure") })
	truth, _ := json.Marshal(bState)
	at := time.Now()
	want := budgetNow(t, truth, at) + 1

	a2 := g.startOn("a", path, &pipeline{})
	waitFor(t, "a mirroring again", func() bool { return a2.rep.Status().Mirroring })
	waitFor(t, "a's state file without replica.unsent", func() bool {
		var unsent map[string]json.RawMessage
		_, err := a2.store.LoadRecord(replica.UnsentRecord, &unsent)
		return err == nil && len(unsent) == 0
	})
	if got := budgetNow(t, g.groupRecord(t, poller.BudgetRecord), at); got > want {
		t.Errorf("after a's restart the group's budget is %.0f calls, b's own is %.0f: b's spend refunded (group's limits %s)", got, want-1, g.limits())
	}

	b.kill()
	waitFor(t, "a active again", a2.working)
	var mine json.RawMessage
	if found, err := a2.store.LoadRecord(poller.BudgetRecord, &mine); err != nil || !found {
		t.Fatalf("a's budget after its takeover: %v %v", found, err)
	}
	if got := budgetNow(t, mine, at); got > want {
		t.Errorf("after a's takeover from b its budget is %.0f calls, b's was %.0f: b's spend refunded (%s)", got, want-1, mine)
	}
}

// TestHolderShownAfterDemotionAndTakeover: the state report's holder
// (Status, Report) of an active replica is itself (noted from its lease,
// not read); once another process holds the lease (taken by force: a's
// demotion; a killed: b's takeover) every replica shows the new holder,
// not the one it noted while it was active.
func TestHolderShownAfterDemotionAndTakeover(t *testing.T) {
	g := newGroup(t)
	a := g.start("a", &pipeline{})
	waitFor(t, "a active", a.working)
	if h := a.rep.Status().Holder; h != "a" {
		t.Errorf("the active a shows %q as the holder", h)
	}
	if rep := a.rep.Report(); rep.Holder != "a" || rep.Since.IsZero() {
		t.Errorf("the active a's report: holder %q since %v", rep.Holder, rep.Since)
	}
	g.takenBy("x")
	waitFor(t, "a demoted, showing x as the holder", func() bool {
		rep := a.rep.Report()
		return rep.Role == "standby" && rep.Holder == "x" && a.rep.Status().Holder == "x"
	})
	g.deleteLease()
	waitFor(t, "a active again", a.working)
	b := g.start("b", &pipeline{})
	waitFor(t, "b mirroring under a", func() bool { return b.rep.Status().Mirroring && b.rep.Status().Holder == "a" })
	a.kill()
	waitFor(t, "b active", b.working)
	waitFor(t, "b showing itself as the holder", func() bool { return b.rep.Status().Holder == "b" && b.rep.Report().Holder == "b" })
}

// deleteLease deletes the lease key (its holder gone: the next replica
// to try takes it).
func (g *group) deleteLease() {
	kv, err := g.js.KeyValue(context.Background(), g.bucket+"_lease")
	if err != nil {
		g.t.Fatal(err)
	}
	if err := kv.Delete(context.Background(), g.key); err != nil {
		g.t.Fatal(err)
	}
}

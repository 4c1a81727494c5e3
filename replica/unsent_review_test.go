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

// killedAfterSent is a group whose active a saved records (save, through
// Records) and wrote them to the group (marker in the group's limits),
// then was killed (kill -9: its state file keeps replica.unsent, which the
// group has), and whose standby b took over: b, and a's state file.
func killedAfterSent(t *testing.T, save func(recs replica.RecordStore), marker string) (g *group, b *member, path string) {
	t.Helper()
	g = newGroup(t)
	path = filepath.Join(t.TempDir(), "a.db")
	a, frozen := g.startFrozen("a", path)
	waitFor(t, "a active", a.working)
	b = g.start("b", &pipeline{})
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })
	save(a.rep.Records(a.store))
	waitFor(t, "a's records in the group", func() bool { return strings.Contains(g.limits(), marker) })
	frozen.dead.Store(true)
	a.kill()
	_ = a.store.Close()
	waitFor(t, "b active", b.working)
	return g, b, path
}

// restartStandby starts a again on its state file at path and waits until
// it mirrors and its limits' writer has handled replica.unsent.
func (g *group) restartStandby(path string) *member {
	t := g.t
	t.Helper()
	a := g.startOn("a", path, &pipeline{})
	waitFor(t, "a mirroring again", func() bool { return a.rep.Status().Mirroring })
	waitFor(t, "a's state file without replica.unsent", func() bool {
		var unsent map[string]json.RawMessage
		_, err := a.store.LoadRecord(replica.UnsentRecord, &unsent)
		return err == nil && len(unsent) == 0
	})
	if !strings.Contains(a.logs.String(), "an earlier process on this state file kept") {
		t.Log("a's restart found no replica.unsent (cleared at the group's write: nothing stale to merge)")
	}
	return a
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
	const daily = 166000
	capacity := 0.25 * daily / 24
	now := time.Now()
	before := now.Add(-5 * time.Hour)
	aState := poller.BudgetState{Level: capacity, At: before, Limit: daily, Costs: []int{1, 1, 1}, Mean: 1, Cycles: 3,
		Spent: map[string]poller.Spend{"a-tenure": {Calls: 100, At: before}}}
	g, b, path := killedAfterSent(t, func(recs replica.RecordStore) {
		if err := recs.SaveRecord(poller.BudgetRecord, aState); err != nil {
			t.Fatal(err)
		}
	}, "a-tenure")

	want, at := burstOfB(t, g, b, before)
	noRefundSinceRestart(t, g, g.restartStandby(path), b, want, at)
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

// liveSessions is the ends after now of every session a "sessions"
// record counts (its writer's and the others').
func liveSessions(t *testing.T, raw []byte, now time.Time) []time.Time {
	t.Helper()
	var r struct {
		UnsureEnds []time.Time `json:"unsure_ends"`
		Others     map[string]struct {
			Ends []time.Time `json:"ends"`
		} `json:"others"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("sessions record %s: %v", raw, err)
	}
	var live []time.Time
	ends := r.UnsureEnds
	for _, o := range r.Others {
		ends = append(ends, o.Ends...)
	}
	for _, end := range ends {
		if end.After(now) {
			live = append(live, end)
		}
	}
	return live
}

// TestAKilledReplicasSentSessionsAndWaitsGoNotBack: a, the active, was
// told to wait an hour and opened a session, both written to the group,
// then killed (its state file keeps replica.unsent: the sessions record).
// b took over, was told to wait two hours and opened a session of its
// own. a's restart on its file, and its takeover from b after, shorten no
// wait and drop no session: the group, then a, holds both waits and
// counts both sessions.
func TestAKilledReplicasSentSessionsAndWaitsGoNotBack(t *testing.T) {
	now := time.Now()
	aEnd := now.Add(2 * time.Hour).UTC()
	g, b, path := killedAfterSent(t, func(recs replica.RecordStore) {
		if err := plenty.SaveWait(recs, plenty.Wait{Until: now.Add(time.Hour), Reason: plenty.WaitThrottled, Why: "429 told a", Measured: now, Announced: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if err := recs.SaveRecord(plenty.SessionsRecord, map[string]any{"owner": "a-client", "unsure_ends": []time.Time{aEnd}, "limit": 3, "saved_at": now}); err != nil {
			t.Fatal(err)
		}
	}, "a-client")

	bRecs := b.rep.Records(b.store)
	if err := plenty.SaveWait(bRecs, plenty.Wait{Until: now.Add(2 * time.Hour), Reason: plenty.WaitThrottled, Why: "429 told b", Measured: now, Announced: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	bEnd := now.Add(3 * time.Hour).UTC()
	if err := bRecs.SaveRecord(plenty.SessionsRecord, map[string]any{"owner": "b-client", "unsure_ends": []time.Time{bEnd}, "limit": 3, "saved_at": time.Now(),
		"others": map[string]any{"a-client": map[string]any{"ends": []time.Time{aEnd}, "saved_at": now}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b's session in the group", func() bool { return strings.Contains(g.limits(), "b-client") })

	check := func(when string, waits, sessions []byte) {
		t.Helper()
		for _, why := range []string{"429 told a", "429 told b"} {
			if !strings.Contains(string(waits), why) {
				t.Errorf("%s: the wait %q is gone: %s", when, why, waits)
			}
		}
		if live := liveSessions(t, sessions, time.Now()); len(live) != 2 {
			t.Errorf("%s: %d sessions counted (%v), want a's and b's: %s", when, len(live), live, sessions)
		}
	}
	a2 := g.restartStandby(path)
	check("the group's limits after a's restart", g.groupRecord(t, plenty.WaitsRecord), g.groupRecord(t, plenty.SessionsRecord))

	b.kill()
	waitFor(t, "a active again", a2.working)
	var waits, sessions json.RawMessage
	if _, err := a2.store.LoadRecord(plenty.WaitsRecord, &waits); err != nil {
		t.Fatal(err)
	}
	if _, err := a2.store.LoadRecord(plenty.SessionsRecord, &sessions); err != nil {
		t.Fatal(err)
	}
	check("a's state file after its takeover from b", waits, sessions)
}

// TestARestartedStandbysUnsentSessionsKeepTheGroups: a, the active,
// opened a session (written to the group), then a second one whose write
// to the group failed, and was killed: its state file keeps the sessions
// record (replica.unsent) the group lacks. b took over (the group's
// record of a's first session in its tenure's first checkpoint) and
// opened a session of its own. a's restart writes its record to the group
// (from the standby), and a takes over from b: it counts all three
// sessions, a's two and b's, none dropped.
func TestARestartedStandbysUnsentSessionsKeepTheGroups(t *testing.T) {
	g := newGroup(t)
	path := filepath.Join(t.TempDir(), "a.db")
	bk, kv := g.faultyBuckets()
	g.configure = func(n string, c *replica.Config) {
		if n == "a" {
			c.Buckets = bk
		}
	}
	a := g.startOn("a", path, &pipeline{})
	g.configure = nil
	waitFor(t, "a active", a.working)
	b := g.start("b", &pipeline{})
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })

	now := time.Now()
	e1, e2, e3 := now.Add(time.Hour).UTC(), now.Add(2*time.Hour).UTC(), now.Add(3*time.Hour).UTC()
	recs := a.rep.Records(a.store)
	if err := recs.SaveRecord(plenty.SessionsRecord, map[string]any{"owner": "a-client", "unsure_ends": []time.Time{e1}, "limit": 3, "saved_at": now}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a's first session in the group", func() bool { return strings.Contains(g.limits(), "a-client") })
	kv.failWrites.Store(1 << 20)
	if err := recs.SaveRecord(plenty.SessionsRecord, map[string]any{"owner": "a-client", "unsure_ends": []time.Time{e1, e2}, "limit": 3, "saved_at": now.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	a.ckpt.fail.Store(true) // dies as in a crash: no last checkpoint (its buckets are on a connection that stays)
	a.kill()
	_ = a.store.Close()

	waitFor(t, "b active", b.working)
	if err := b.rep.Records(b.store).SaveRecord(plenty.SessionsRecord, map[string]any{"owner": "b-client", "unsure_ends": []time.Time{e3}, "limit": 3, "saved_at": time.Now(),
		"others": map[string]any{"a-client": map[string]any{"ends": []time.Time{e1}, "saved_at": now}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b's session in the group", func() bool { return strings.Contains(g.limits(), "b-client") })

	a2 := g.startOn("a", path, &pipeline{})
	waitFor(t, "a's second session in the group, written by the standby", func() bool {
		s := g.groupRecord(t, plenty.SessionsRecord)
		return s != nil && len(liveSessions(t, s, time.Now())) == 3
	})
	b.kill()
	waitFor(t, "a active again", a2.working)
	var sessions json.RawMessage
	if _, err := a2.store.LoadRecord(plenty.SessionsRecord, &sessions); err != nil {
		t.Fatal(err)
	}
	if live := liveSessions(t, sessions, time.Now()); len(live) != 3 {
		t.Errorf("after its takeover a counts %d sessions (%v), want a's two and b's: %s", len(live), live, sessions)
	}
}

// TestReplicaUnsentKeepsOnlyWhatTheGroupLacks: the active's save written
// to the group leaves nothing in its state file's replica.unsent (a kill
// right after it leaves nothing stale), while a save the group lacks (its
// write failed) is kept, through a demotion too.
func TestReplicaUnsentKeepsOnlyWhatTheGroupLacks(t *testing.T) {
	unsent := func(m *member) map[string]json.RawMessage {
		var u map[string]json.RawMessage
		if _, err := m.store.LoadRecord(replica.UnsentRecord, &u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	for _, fails := range []bool{false, true} {
		g := newGroup(t)
		bk, kv := g.faultyBuckets()
		g.configure = func(_ string, c *replica.Config) { c.Buckets = bk }
		a := g.start("a", &pipeline{})
		waitFor(t, "a active", a.working)
		if fails {
			kv.failWrites.Store(1 << 20)
		}
		now := time.Now()
		if err := a.rep.Records(a.store).SaveRecord(poller.BudgetRecord, poller.BudgetState{Level: 10, At: now, Limit: 166000,
			Spent: map[string]poller.Spend{"a-tenure": {Calls: 7, At: now}}}); err != nil {
			t.Fatal(err)
		}
		if got := unsent(a); (len(got) == 1) != fails {
			t.Fatalf("after the save (write fails: %v) replica.unsent holds %v; want the budget only when the group's write failed", fails, got)
		}
		g.takenBy("x")
		waitFor(t, "a demoted", a.demotedToStandby)
		switch got := unsent(a); {
		case fails && len(got) != 1:
			t.Errorf("a's save the group lacks is gone from replica.unsent after its demotion: %v", got)
		case !fails && len(got) != 0:
			t.Errorf("a's save the group has is still in replica.unsent after its demotion: %v", got)
		}
	}
}

// TestARestartTakingAFreeLeaseRefundsNoSpend: as in
// TestAKilledReplicasSentBudgetRefundsNoSpend, but b is killed too, after
// a checkpoint of its burst, and a starts again on its file with the lease
// free: it holds the lease at once and waits for its turn to take over
// (Config.Takeovers), while its limits' writer handles replica.unsent
// (its first tries failed: NATS slow to answer at the start). The
// writer must not write a's file's records of five hours ago to the group
// as the active's before the takeover restored the group's: the group's
// budget, and a's once working, is b's, not one with b's burst refunded.
func TestARestartTakingAFreeLeaseRefundsNoSpend(t *testing.T) {
	const daily = 166000
	capacity := 0.25 * daily / 24
	now := time.Now()
	before, burst := now.Add(-5*time.Hour), now.Add(-time.Hour)
	g, b, path := killedAfterSent(t, func(recs replica.RecordStore) {
		if err := recs.SaveRecord(poller.BudgetRecord, poller.BudgetState{Level: capacity, At: before, Limit: daily,
			Spent: map[string]poller.Spend{"a-tenure": {Calls: 100, At: before}}}); err != nil {
			t.Fatal(err)
		}
	}, "a-tenure")
	bState := poller.BudgetState{Level: capacity - 3000, At: burst, Limit: daily,
		Spent: map[string]poller.Spend{"a-tenure": {Calls: 100, At: before}, "b-tenure": {Calls: 3000, At: burst}}}
	if err := b.rep.Records(b.store).SaveRecord(poller.BudgetRecord, bState); err != nil {
		t.Fatal(err)
	}
	b.rep.Swept()
	waitFor(t, "b's checkpoint of its burst", func() bool {
		cp, ok := g.checkpoint()
		return ok && cp.Instance == "b" && strings.Contains(string(cp.State), "b-tenure")
	})
	b.kill()
	waitFor(t, "the lease free", g.leaseFree)
	truth, _ := json.Marshal(bState)

	turn := make(chan struct{}, 1)
	turn <- struct{}{} // another shop's takeover has the only turn
	bk, kv := g.faultyBuckets()
	kv.failReads.Store(true) // the writer's first tries fail: it writes once a holds the lease
	g.configure = func(_ string, c *replica.Config) { c.Takeovers, c.Buckets = turn, bk }
	a2 := g.startOn("a", path, &pipeline{})
	g.configure = nil
	waitFor(t, "a holding the lease", a2.rep.Active)
	kv.failReads.Store(false)
	waitFor(t, "a's replica.unsent handled", func() bool {
		var unsent map[string]json.RawMessage
		_, err := a2.store.LoadRecord(replica.UnsentRecord, &unsent)
		return a2.rep.Active() && err == nil && len(unsent) == 0
	})
	at := time.Now()
	if got, want := budgetNow(t, g.groupRecord(t, poller.BudgetRecord), at), budgetNow(t, truth, at); got > want+1 {
		t.Errorf("while a waits for its turn the group's budget is %.0f calls, b's was %.0f: a's file's records of hours ago written as the active's (%s)", got, want, g.limits())
	}
	<-turn
	waitFor(t, "a working", a2.working)
	var mine json.RawMessage
	if found, err := a2.store.LoadRecord(poller.BudgetRecord, &mine); err != nil || !found {
		t.Fatalf("a's budget after its takeover: %v %v", found, err)
	}
	if got, want := budgetNow(t, mine, at), budgetNow(t, truth, at); got > want+1 {
		t.Errorf("a's budget once working is %.0f calls, b's was %.0f: b's spend refunded (%s; group's limits %s)", got, want, mine, g.limits())
	}
}

package replica_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/replica"
)

// TestATakenOverWaitIsHeldOnce: a, the active, was told to wait an hour
// (written to the group), then killed; b took over (the wait moved onto
// its clock: its copy differs from the group's by the nanoseconds to
// milliseconds of the clocks' bound, differently at each reading) and
// saves its budget: the group holds a's wait once, not a copy per
// reading.
func TestATakenOverWaitIsHeldOnce(t *testing.T) {
	g := newGroup(t)
	a := g.start("a", &pipeline{})
	waitFor(t, "a active", a.working)
	b := g.start("b", &pipeline{})
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })
	now := time.Now()
	if err := plenty.SaveWait(a.rep.Records(a.store), plenty.Wait{Until: now.Add(time.Hour), Reason: plenty.WaitThrottled, Why: "429 told a", Measured: now, Announced: time.Hour}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a's wait in the group", func() bool { return strings.Contains(g.limits(), "429 told a") })
	a.kill()
	waitFor(t, "b active", b.working)
	for i := range 3 {
		if err := b.rep.Records(b.store).SaveRecord(poller.BudgetRecord, poller.BudgetState{Level: 100, At: time.Now(), Limit: 166000,
			Spent: map[string]poller.Spend{"b-tenure": {Calls: int64(i + 1), At: time.Now()}}}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "b's budget in the group", func() bool { return strings.Contains(g.limits(), `"calls":3`) })
	var waits struct {
		Waits []plenty.Wait `json:"waits"`
	}
	if err := json.Unmarshal(g.groupRecord(t, plenty.WaitsRecord), &waits); err != nil || len(waits.Waits) != 1 {
		t.Errorf("the group holds %d waits (%v), want a's one: %s", len(waits.Waits), err, g.groupRecord(t, plenty.WaitsRecord))
	}
}

// lostAnswerKV is a checkpoint bucket whose writes of the group's limits,
// while lose is set, reach the server and then fail (the answer lost).
type lostAnswerKV struct {
	jetstream.KeyValue
	lose atomic.Bool
}

func (k *lostAnswerKV) lost(key string, err error) error {
	if err == nil && isLimits(key) && k.lose.Load() {
		return errInjected
	}
	return err
}

func (k *lostAnswerKV) Create(ctx context.Context, key string, v []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	rev, err := k.KeyValue.Create(ctx, key, v, opts...)
	return rev, k.lost(key, err)
}

func (k *lostAnswerKV) Update(ctx context.Context, key string, v []byte, rev uint64) (uint64, error) {
	rev, err := k.KeyValue.Update(ctx, key, v, rev)
	return rev, k.lost(key, err)
}

// TestAReplicasKeptLiveWaitTheGroupHasGoesNotBack: as
// TestAKilledReplicasSentLiveWaitGoesNotBack, but the answers to a's
// writes were lost: its state file keeps its wait and its budget of five
// hours ago (replica.unsent) though the group has them. At its restart
// the records add nothing to the group's (b's copy of the wait is the
// same answer on b's clock): a writes nothing back, b stays the group's
// last writer, and no spend of b's is refunded.
func TestAReplicasKeptLiveWaitTheGroupHasGoesNotBack(t *testing.T) {
	const daily = 166000
	capacity := 0.25 * daily / 24
	now := time.Now()
	before := now.Add(-5 * time.Hour)
	g := newGroup(t)
	path := filepath.Join(t.TempDir(), "a.db")
	bk, err := replica.BindBuckets(context.Background(), g.js, g.bucket, ttl, 1, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	lost := &lostAnswerKV{KeyValue: bk.Checkpoints}
	bk.Checkpoints = lost
	var frozen *frozenStore
	g.configure = func(n string, c *replica.Config) {
		if n == "a" && frozen == nil {
			frozen = &frozenStore{checkpointStore: c.Store.(*checkpointStore)}
			c.Store, c.Buckets = frozen, bk
		}
	}
	a := g.startOn("a", path, &pipeline{})
	g.configure = nil
	waitFor(t, "a active", a.working)
	b := g.start("b", &pipeline{})
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })
	lost.lose.Store(true)
	recs := a.rep.Records(a.store)
	if err := plenty.SaveWait(recs, plenty.Wait{Until: now.Add(time.Hour), Reason: plenty.WaitThrottled, Why: "429 told a", Measured: now, Announced: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := recs.SaveRecord(poller.BudgetRecord, poller.BudgetState{Level: capacity, At: before, Limit: daily, Costs: []int{1, 1, 1}, Mean: 1, Cycles: 3,
		Spent: map[string]poller.Spend{"a-tenure": {Calls: 100, At: before}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a's records in the group", func() bool { return strings.Contains(g.limits(), "a-tenure") })
	frozen.dead.Store(true)
	a.kill()
	_ = a.store.Close()
	waitFor(t, "b active", b.working)

	want, at := burstOfB(t, g, b, before)
	a2 := g.restartStandby(path)
	if !strings.Contains(a2.logs.String(), "an earlier process on this state file kept") {
		t.Fatal("a's restart found no replica.unsent: the case is not reached")
	}
	var v struct {
		Writer lease.Writer `json:"writer"`
	}
	if err := json.Unmarshal([]byte(g.limits()), &v); err != nil || v.Writer.Instance != "b" {
		t.Errorf("after a's restart the group's limits were written by %q (%v), want b's still: a wrote back what the group had (%s)", v.Writer.Instance, err, g.limits())
	}
	noRefundSinceRestart(t, g, a2, b, want, at)
}

// burstOfB has b, active after a (a's budget full five hours ago, before,
// with its tenure's 100 calls), save its budget after a burst of 3,000
// calls an hour ago, four hours at a full bucket after the takeover: want
// is the most a budget continuing the group's may then spend at at (b's,
// and a call for the rounding).
func burstOfB(t *testing.T, g *group, b *member, before time.Time) (want float64, at time.Time) {
	t.Helper()
	const daily = 166000
	burst := before.Add(4 * time.Hour)
	bState := poller.BudgetState{Level: 0.25*daily/24 - 3000, At: burst, Limit: daily, Costs: []int{1, 1, 1}, Mean: 1, Cycles: 3,
		Spent: map[string]poller.Spend{"a-tenure": {Calls: 100, At: before}, "b-tenure": {Calls: 3000, At: burst}}}
	if err := b.rep.Records(b.store).SaveRecord(poller.BudgetRecord, bState); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b's budget in the group", func() bool { return strings.Contains(g.limits(), "b-tenure") })
	truth, _ := json.Marshal(bState)
	at = time.Now()
	return budgetNow(t, truth, at) + 1, at
}

// noRefundSinceRestart checks, after a2 (a restarted on its state file)
// mirrors, that neither the group's budget nor a2's, once it has taken
// over from b (killed now), allows more than want at at (burstOfB).
func noRefundSinceRestart(t *testing.T, g *group, a2, b *member, want float64, at time.Time) {
	t.Helper()
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

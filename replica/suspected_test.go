package replica_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/replica"
)

// stuckRenewalKV is a lease bucket whose renewals fail while stuck is
// set (the holder cannot reach the key's stream leader, say), while
// everything else works.
type stuckRenewalKV struct {
	jetstream.KeyValue
	stuck atomic.Bool
}

func (k *stuckRenewalKV) Update(ctx context.Context, key string, v []byte, rev uint64) (uint64, error) {
	if k.stuck.Load() {
		return 0, errInjected
	}
	return k.KeyValue.Update(ctx, key, v, rev)
}

// TestWaitAnsweredAfterTheDeadlineReachesTheGroup: a's call was in
// flight when its lease's deadline passed; the 429 that answers it
// arrives after the deadline (a's gate closed): the wait still reaches
// the group, and the replica that takes over honours it.
func TestWaitAnsweredAfterTheDeadlineReachesTheGroup(t *testing.T) {
	t.Parallel()
	g := newGroup(t)
	srv, firstCall := shopFirstCall(t)
	bk, _ := g.faultyBuckets()
	stuck := &stuckRenewalKV{KeyValue: bk.Lease}
	bk.Lease = stuck
	g.configure = func(name string, c *replica.Config) {
		if name == "a" {
			c.Buckets = bk
		}
	}
	a := g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	pending := make(chan plenty.Wait, 1)
	b := g.start("b", callingPipeline(t, srv.URL, pending))
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })
	stuck.stuck.Store(true)
	waitFor(t, "a's gate closed by its deadline", func() bool { return a.rep.Gate() != nil })
	until := time.Now().Add(6 * time.Second)
	w := plenty.Wait{Until: until, Reason: plenty.WaitThrottled, Why: "429 after the deadline", Measured: time.Now(), Announced: 6 * time.Second}
	if err := plenty.SaveWait(a.rep.Records(a.store), w); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(g.limits(), "429 after the deadline") {
		t.Error("the wait answered after a's deadline is not in the group's limits")
	}
	waitFor(t, "b active", b.working)
	noCallBefore(t, firstCall, until)
}

// TestSuccessorClockAheadKeepsTheWait: the replica that takes over has a
// wall clock 4 s ahead of the one that was told to wait: it still makes
// no call before the wait ends (the group's times are not read on the
// writer's clock).
func TestSuccessorClockAheadKeepsTheWait(t *testing.T) {
	t.Parallel()
	g := newGroup(t)
	srv, firstCall := shopFirstCall(t)
	ahead := func() time.Time { return time.Now().Add(4 * time.Second) }
	g.configure = func(name string, c *replica.Config) {
		if name == "b" {
			c.Now = ahead
		}
	}
	a := g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	until := groupWait(t, g, a, 7*time.Second)
	pending := make(chan plenty.Wait, 1)
	b := g.start("b", callingPipelineOn(t, srv.URL, pending, ahead))
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })
	takesOverInWait(t, a, b, firstCall, until)
}

// TestUndecodableGroupRecordKeepsTheCheckpoints: the group's limits hold
// valid JSON whose waits record does not decode: the checkpoint's valid
// wait is kept, not replaced by it.
func TestUndecodableGroupRecordKeepsTheCheckpoints(t *testing.T) {
	t.Parallel()
	g := newGroup(t)
	srv, firstCall := shopFirstCall(t)
	a := g.start("a", &pipeline{})
	waitFor(t, "a active", a.working)
	until := time.Now().Add(6 * time.Second)
	w := plenty.Wait{Until: until, Reason: plenty.WaitThrottled, Why: "429 in the checkpoint", Measured: time.Now(), Announced: 6 * time.Second}
	if err := plenty.SaveWait(a.store, w); err != nil { // not through Records: only the checkpoint has it
		t.Fatal(err)
	}
	a.rep.Swept()
	waitFor(t, "a's checkpoint", func() bool {
		cp, ok := g.checkpoint()
		return ok && strings.Contains(string(cp.State), "429 in the checkpoint")
	})
	a.stop() // released; its last limits written
	kv, err := g.js.KeyValue(context.Background(), g.bucket+"_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(context.Background(), g.key+".limits")
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]json.RawMessage
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		t.Fatal(err)
	}
	v["records"] = json.RawMessage(`{"waits":{"waits":"not a list"}}`)
	v["written"], _ = json.Marshal(time.Now().UTC()) // the newest the group knows
	bad, _ := json.Marshal(v)
	if _, err := kv.Put(context.Background(), g.key+".limits", bad); err != nil {
		t.Fatal(err)
	}
	pending := make(chan plenty.Wait, 1)
	b := g.start("b", callingPipeline(t, srv.URL, pending))
	waitFor(t, "b active", b.working)
	noCallBefore(t, firstCall, until)
}

package replica_test

import (
	"bytes"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/replica"
)

// TestTwoShopsOnOneNATSKeepTheirSealedSessionsApart: two shops' groups
// share one NATS server and bucket (and even their replicas' names). Each
// active saves its own sealed session; each group's limits key holds its
// shop's only, and each standby taking over goes on with its own shop's,
// never the other's.
func TestTwoShopsOnOneNATSKeepTheirSealedSessionsApart(t *testing.T) {
	ga := newGroup(t)
	gb := newGroupOn(t, ga.url, 1)
	gb.key = lease.Key("shop-b", stream)
	for _, g := range []*group{ga, gb} {
		g.configure = func(_ string, c *replica.Config) { c.CheckpointEvery = time.Hour }
	}
	wm := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	aa := ga.activeWithCheckpoint(&pipeline{}, wm)
	ab := gb.activeWithCheckpoint(&pipeline{}, wm)
	const boxA, boxB = "c2hvcC1h", "c2hvcC1i"
	saveSealed(t, aa, boxA)
	saveSealed(t, ab, boxB)
	kv, err := ga.js.KeyValue(t.Context(), ga.bucket+"_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	limitsOf := func(key string) string {
		e, err := kv.Get(t.Context(), key+".limits")
		if err != nil {
			return ""
		}
		return string(e.Value())
	}
	waitFor(t, "both groups' limits written", func() bool {
		return strings.Contains(limitsOf(ga.key), boxA) && strings.Contains(limitsOf(gb.key), boxB)
	})
	if la, lb := limitsOf(ga.key), limitsOf(gb.key); strings.Contains(la, boxB) || strings.Contains(lb, boxA) {
		t.Fatalf("a shop's limits hold the other's session: %s / %s", la, lb)
	}
	ba := ga.start("b", &pipeline{})
	bb := gb.start("b", &pipeline{})
	waitFor(t, "both standbys mirroring", func() bool { return ba.rep.Status().Mirroring && bb.rep.Status().Mirroring })
	aa.kill()
	ab.kill()
	ga.takesOverWithSession(ba, boxA)
	gb.takesOverWithSession(bb, boxB)
}

// TestTheCheckpointLookLeavesACheckpointThatIsThere: the checkpoint bucket
// is deleted and created again with an older checkpoint of the group (a
// restore, another writer) while the active a sweeps no more (a wait).
// a's look finds a checkpoint there: it must not write over it.
func TestTheCheckpointLookLeavesACheckpointThatIsThere(t *testing.T) {
	g := newGroup(t)
	g.configure = func(_ string, c *replica.Config) { c.CheckpointEvery = 300 * time.Millisecond }
	wm := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	a := g.activeWithCheckpoint(&pipeline{}, wm)
	kv, old := g.checkpointEntry()
	time.Sleep(400 * time.Millisecond) // past CheckpointEvery: the next sweep's checkpoint is due
	g.advance(a, wm.Add(time.Minute))
	kv = g.restoreCheckpointBucket(old.Value())
	// Absence over three looks (no event tells that a look found the key).
	time.Sleep(3 * time.Second)
	e, err := kv.Get(t.Context(), g.key)
	if err != nil || !bytes.Equal(e.Value(), old.Value()) || e.Revision() != 1 {
		t.Errorf("the checkpoint that was there was written over (revision %d, %v)", e.Revision(), err)
	}
	if strings.Contains(a.logs.String(), "checkpoint is gone") {
		t.Errorf("a took a checkpoint that is there for gone:\n%s", a.logs.String())
	}
}

// TestAWaitHoldsThroughABucketDeletionAndARestart: the active a is in a
// long wait the service asked for (saved through Records, as its pacer
// does), the checkpoint bucket is deleted, a writes the group's limits
// again (the look), then a is killed and started again on its state file
// within the wait while b stands by. Whoever is active next makes no call
// before the wait ends.
func TestAWaitHoldsThroughABucketDeletionAndARestart(t *testing.T) {
	g := newGroup(t)
	g.configure = func(_ string, c *replica.Config) { c.CheckpointEvery = time.Second }
	srv, firstCall := shopFirstCall(t)
	wm := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	a := g.activeWithCheckpoint(&pipeline{}, wm)
	until := time.Now().Add(8 * time.Second)
	wait := plenty.Wait{Until: until, Reason: plenty.WaitThrottled, Why: "429 with Retry-After: 8", Measured: time.Now(), Announced: 8 * time.Second}
	if err := plenty.SaveWait(a.rep.Records(a.store), wait); err != nil {
		t.Fatal(err)
	}
	if err := g.js.DeleteKeyValue(t.Context(), g.bucket+"_checkpoint"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the group's limits written again with the wait", func() bool {
		kv, err := g.js.KeyValue(t.Context(), g.bucket+"_checkpoint")
		if err != nil {
			return false
		}
		e, err := kv.Get(t.Context(), g.key+".limits")
		return err == nil && strings.Contains(string(e.Value()), "Retry-After: 8")
	})
	pending := make(chan plenty.Wait, 2)
	b := g.start("b", callingPipeline(t, srv.URL, pending))
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })
	path := a.store.Path()
	a.kill()
	a.store.Close()
	a2 := g.startOn("a", path, callingPipeline(t, srv.URL, pending))
	waitFor(t, "a or b active", func() bool { return a2.working() || b.working() })
	waitFor(t, "the first call after the restart", func() bool { return firstCall.Load() != 0 })
	if at := time.Unix(0, firstCall.Load()); at.Before(until) {
		t.Errorf("the shop was called at %v, inside the wait (until %v)", at, until)
	}
}

// TestTheCheckpointLookReadsOncePerCheckpointEvery: while the active a
// sweeps no more (a wait), its look reads the group's keys (limits, and
// the checkpoint only when they are gone) once per CheckpointEvery at most (the cost of a fleet of shops in a wait:
// one read per shop and period, 1 s apart at least), and does read it.
func TestTheCheckpointLookReadsOncePerCheckpointEvery(t *testing.T) {
	g := newGroup(t)
	const every = 250 * time.Millisecond
	g.configure = func(_ string, c *replica.Config) { c.CheckpointEvery = every }
	g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	nc, err := nats.Connect(g.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var reads atomic.Int64
	count := func(m *nats.Msg) {
		for _, k := range []string{g.key, g.key + ".limits"} {
			if strings.HasSuffix(m.Subject, "."+k) || strings.Contains(string(m.Data), `.`+k+`"`) {
				reads.Add(1)
			}
		}
	}
	for _, subj := range []string{"$JS.API.DIRECT.GET.>", "$JS.API.STREAM.MSG.GET.>"} {
		if _, err := nc.Subscribe(subj, count); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// The bound is reckoned from the time that really passed (a loaded
	// machine sleeps longer, and the look reads no sooner for it).
	start := time.Now()
	waitFor(t, "a look of the active's", func() bool { return reads.Load() >= 1 })
	time.Sleep(3 * time.Second)
	n, elapsed := reads.Load(), time.Since(start)
	t.Logf("%d reads of the group's keys in %v (CheckpointEvery %v)", n, elapsed, every)
	period := max(every, time.Second) // the look is 1 s apart at least
	if most := int64(elapsed/period) + 2; n > most {
		t.Errorf("%d reads of the group's keys in %v, want at most %d", n, elapsed, most)
	}
}

// TestAWaitHoldsWhenTheBucketComesBackWithAnOlderCheckpoint: the active a
// is in a long wait the service asked for (saved through Records, as its
// pacer does) when the checkpoint bucket is deleted and created again
// with an older checkpoint of the group's (a restore): the checkpoint is
// there, the group's limits are not. b starts (a new pod) and takes over
// after a's kill within the wait: it must make no call before the wait
// ends.
func TestAWaitHoldsWhenTheBucketComesBackWithAnOlderCheckpoint(t *testing.T) {
	g := newGroup(t)
	g.configure = func(_ string, c *replica.Config) { c.CheckpointEvery = time.Second }
	srv, firstCall := shopFirstCall(t)
	a := g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	kv, old := g.checkpointEntry()
	until := time.Now().Add(10 * time.Second)
	wait := plenty.Wait{Until: until, Reason: plenty.WaitThrottled, Why: "429 with Retry-After: 10", Measured: time.Now(), Announced: 10 * time.Second}
	if err := plenty.SaveWait(a.rep.Records(a.store), wait); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the wait in the group's limits", func() bool {
		e, err := kv.Get(t.Context(), g.key+".limits")
		return err == nil && strings.Contains(string(e.Value()), "Retry-After: 10")
	})
	kv = g.restoreCheckpointBucket(old.Value())
	// a's look writes the limits again (on a loaded machine not within a
	// fixed time: waited for, not slept).
	waitFor(t, "a's look to write the group's limits again", func() bool {
		e, err := kv.Get(t.Context(), g.key+".limits")
		return err == nil && strings.Contains(string(e.Value()), "Retry-After: 10")
	})
	pending := make(chan plenty.Wait, 1)
	b := g.start("b", callingPipeline(t, srv.URL, pending))
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })
	a.kill()
	waitFor(t, "b active", b.working)
	waitFor(t, "b's first call", func() bool { return firstCall.Load() != 0 })
	if at := time.Unix(0, firstCall.Load()); at.Before(until) {
		t.Errorf("b called the shop at %v, inside a's wait (until %v): the group's limits were not written again", at.Format(time.StampMilli), until.Format(time.StampMilli))
	}
}

// restoreCheckpointBucket deletes the group's checkpoint bucket and
// creates it again holding only the checkpoint cp (a restore).
func (g *group) restoreCheckpointBucket(cp []byte) jetstream.KeyValue {
	g.t.Helper()
	if err := g.js.DeleteKeyValue(g.t.Context(), g.bucket+"_checkpoint"); err != nil {
		g.t.Fatal(err)
	}
	kv, err := lease.CheckpointBucket(g.t.Context(), g.js, g.bucket+"_checkpoint")
	if err != nil {
		g.t.Fatal(err)
	}
	if _, err := kv.Put(g.t.Context(), g.key, cp); err != nil {
		g.t.Fatal(err)
	}
	return kv
}

// checkpointEntry is the checkpoint bucket and the group's checkpoint in it.
func (g *group) checkpointEntry() (jetstream.KeyValue, jetstream.KeyValueEntry) {
	g.t.Helper()
	kv, err := g.js.KeyValue(g.t.Context(), g.bucket+"_checkpoint")
	if err != nil {
		g.t.Fatal(err)
	}
	e, err := kv.Get(g.t.Context(), g.key)
	if err != nil {
		g.t.Fatal(err)
	}
	return kv, e
}

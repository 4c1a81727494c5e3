package replica_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
)

// TestTakeoverHonoursWaitSinceTheCheckpoint: the active is told to wait
// (a 429 naming a reset ahead) inside a sweep that never finishes, so no
// checkpoint carries the wait; it reaches the group at once (the limits
// key), and the replica that takes over after a kill makes no call before
// the reset.
func TestTakeoverHonoursWaitSinceTheCheckpoint(t *testing.T) {
	t.Parallel()
	g := newGroup(t)
	srv, firstCall := shopFirstCall(t)

	a := g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	until := time.Now().Add(4 * time.Second)
	wait := plenty.Wait{Until: until, Reason: plenty.WaitDailyQuota, Why: "429 naming a reset", Measured: time.Now(), Announced: 4 * time.Second}
	if err := plenty.SaveWait(a.rep.Records(a.store), wait); err != nil { // what a's pacer saves; no sweep ends, no checkpoint
		t.Fatal(err)
	}
	kv, err := g.js.KeyValue(context.Background(), g.bucket+"_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the group's limits with a's wait", func() bool {
		e, err := kv.Get(context.Background(), g.key+".limits")
		return err == nil && strings.Contains(string(e.Value()), "429 naming a reset")
	})
	if cp, _ := g.checkpoint(); strings.Contains(string(cp.State), "429 naming a reset") {
		t.Fatal("precondition: the wait is in the checkpoint")
	}

	pending := make(chan plenty.Wait, 1)
	b := g.start("b", callingPipeline(t, srv.URL, pending))
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })
	a.kill()
	waitFor(t, "b active", b.working)
	if w := <-pending; w.Until.Before(until.Add(-time.Second)) {
		t.Errorf("b's client after the takeover waits until %v, want a's wait until %v", w.Until, until)
	}
	waitFor(t, "b's first call", func() bool { return firstCall.Load() != 0 })
	if at := time.Unix(0, firstCall.Load()); at.Before(until) {
		t.Errorf("b called the shop at %v, inside a's wait (until %v)", at, until)
	}
	if !strings.Contains(b.logs.String(), "the group's limits") {
		t.Errorf("b does not say it honoured the group's limits:\n%s", b.logs.String())
	}
}

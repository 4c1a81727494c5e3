package replica_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/replica"
	"github.com/orderwatch/orderwatch/state"
)

// Hostile checks of the fast takeover's reads made at its start
// (mirror.Takeover's prefetch, replica's prefetchClock).

// restoreHook is a member's state file that runs a function at a restore
// of a checkpoint (state.Store.RestoreWith) before the restore: a moment
// inside a takeover after its reads at the start, before the group's
// limits are merged (mirror.Config.BeforeTenure).
type restoreHook struct {
	*checkpointStore
	before func()
}

func (s *restoreHook) RestoreWith(c state.Checkpoint, p state.Restore) error {
	if s.before != nil {
		s.before()
	}
	return s.checkpointStore.RestoreWith(c, p)
}

// TestWaitWrittenDuringTheTakeoverIsHonoured: while b takes over from a,
// after b's reads at the takeover's start and before b merges the group's
// limits, a (past its tenure: a 429 answered late) writes a wait to the
// group's limits. b's first call comes after that wait: the merge before
// the first call is of the group's limits as they are then, not as the
// takeover's start read them (b's follower of the limits starts after the
// takeover and sees only later writes).
func TestWaitWrittenDuringTheTakeoverIsHonoured(t *testing.T) {
	t.Parallel()
	g := newGroup(t)
	srv, firstCall := shopFirstCall(t)
	a := g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))

	var armed atomic.Bool
	var once sync.Once
	var until atomic.Int64
	var b *member
	hook := &restoreHook{}
	hook.before = func() {
		// Inside b's takeover (b holds the lease; its mirror stopped).
		if !armed.Load() || b == nil || !b.rep.Active() {
			return
		}
		once.Do(func() {
			d := 5 * time.Second
			w := plenty.Wait{Until: time.Now().Add(d), Reason: plenty.WaitThrottled, Why: "429 answered late to a", Measured: time.Now(), Announced: d}
			until.Store(w.Until.UnixNano())
			if err := plenty.SaveWait(a.rep.Records(a.store), w); err != nil {
				t.Error(err)
			}
			if !strings.Contains(g.limits(), "429 answered late to a") {
				t.Error("a's late wait is not in the group's limits when its save returned")
			}
		})
	}
	g.configure = func(name string, c *replica.Config) {
		if name == "b" {
			hook.checkpointStore = c.Store.(*checkpointStore)
			c.Store = hook
		}
	}
	pending := make(chan plenty.Wait, 1)
	b = g.start("b", callingPipeline(t, srv.URL, pending))
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })
	armed.Store(true)
	a.stop() // released: b takes over at once
	waitFor(t, "b active", b.working)
	if until.Load() == 0 {
		t.Fatal("no restore inside b's takeover: the test did not test")
	}
	noCallBefore(t, firstCall, time.Unix(0, until.Load()))
}

// TestSuccessorRightAfterATakeoverKeepsWhatItMerged: b takes over with a
// wait of its own the group never got (b, as a standby, could not write
// the group's limits: kept in its file, UnsentRecord) and cannot write
// the merged limits back (the limits' writer fails), then dies; c, which
// takes over right after, honours both the group's wait (a's) and b's:
// b's tenure's first checkpoint carries what b merged.
func TestSuccessorRightAfterATakeoverKeepsWhatItMerged(t *testing.T) {
	t.Parallel()
	g, a, srv, firstCall, untilA := groupInWait(t, 4*time.Second)
	b := g.startFaulty("b", &pipeline{}, func(f *faultyKV) { f.failWrites.Store(1 << 20) })
	d := 10 * time.Second
	untilB := time.Now().Add(d)
	w := plenty.Wait{Until: untilB, Reason: plenty.WaitThrottled, Why: "429 answered to the standby b", Measured: time.Now(), Announced: d}
	if err := plenty.SaveWait(b.rep.Records(b.store), w); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(g.limits(), "answered to the standby b") {
		t.Fatal("precondition: b's wait reached the group's limits")
	}
	a.kill()
	waitFor(t, "b active", b.working)
	cp, ok := g.checkpoint()
	if !ok || cp.Instance != "b" {
		t.Fatalf("b's tenure's first checkpoint: %+v %v", cp.Writer(), ok)
	}
	pending := make(chan plenty.Wait, 1)
	c := g.start("c", callingPipeline(t, srv.URL, pending))
	waitFor(t, "c mirroring", func() bool { return c.rep.Status().Mirroring })
	if strings.Contains(g.limits(), "answered to the standby b") {
		t.Fatal("precondition: b's wait reached the group's limits")
	}
	takesOverInWait(t, b, c, firstCall, untilB)
	if untilB.Before(untilA) {
		t.Fatal("the test's waits are in the wrong order")
	}
}

// TestTakeoverWritesTheMergedLimitsSoon: the replica that takes over
// writes the merged limits back to the group (by the limits' writer, not
// before its first call), with what the group held: a's wait stays.
func TestTakeoverWritesTheMergedLimitsSoon(t *testing.T) {
	t.Parallel()
	g, a, _, _, _ := groupInWait(t, 6*time.Second)
	b := g.start("b", &pipeline{})
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })
	a.kill()
	waitFor(t, "b active", b.working)
	waitFor(t, "the group's limits written by b", func() bool {
		v := g.limits()
		return strings.Contains(v, `"instance":"b"`) && strings.Contains(v, "429 Retry-After")
	})
}

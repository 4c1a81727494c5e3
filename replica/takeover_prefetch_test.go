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
// (mirror.Takeover's prefetch, replica's prefetchLimits).

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

package replica_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/replica"
)

// TestRestoreKeepsTheReplicasOwnWait: the active is told to wait by the
// service (a 429) while every write of the group's limits fails, then
// loses the lease and rewinds to the group's checkpoint, which holds no
// such wait, and takes the lease back. The wait must bind it again: the
// service announced it to this process (seen once in TestTakeoverChaos
// -chaos-first-sync before the fix: 10 calls inside a 5 s wait). The
// rewind replaced the state file's records of the limits with the
// checkpoint's; the replica now keeps what it saved until a write of the
// group's limits holds it.
func TestRestoreKeepsTheReplicasOwnWait(t *testing.T) {
	g := newGroup(t)
	a, kv, w := g.activeWithUnwrittenWait("429 whose group write failed")
	g.takenBy("x")
	waitFor(t, "a mirroring", a.demotedToStandby)
	kv.failWrites.Store(0)
	waitFor(t, "a active again", a.working)
	waits, _, err := plenty.LoadWaits(a.store)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(waits, func(have plenty.Wait) bool { return have.Why == w.Why }) {
		t.Errorf("the wait the service announced to a is gone from its state file after the rewind and the takeover: %+v", waits)
	}
	waitFor(t, "the wait in the group's limits", func() bool { return strings.Contains(g.limits(), w.Why) })
}

// activeWithUnwrittenWait is the group's active a (a checkpoint written)
// told by the service to wait an hour (why) while every write of the
// group's limits fails: the wait is in its state file, not in the group.
func (g *group) activeWithUnwrittenWait(why string) (a *member, kv *faultyKV, w plenty.Wait) {
	t := g.t
	t.Helper()
	bk, kv := g.faultyBuckets()
	g.configure = func(n string, c *replica.Config) {
		if n == "a" {
			c.Buckets = bk
		}
	}
	a = g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	kv.failWrites.Store(1 << 20)
	w = plenty.Wait{Until: time.Now().Add(time.Hour), Reason: plenty.WaitThrottled, Why: why, Measured: time.Now(), Announced: time.Hour}
	_ = plenty.SaveWait(a.rep.Records(a.store), w)
	if strings.Contains(g.limits(), w.Why) {
		t.Fatal("the wait reached the group: the fault did not hold")
	}
	return a, kv, w
}

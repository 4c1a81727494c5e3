package replica_test

import (
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/replica"
	"github.com/orderwatch/orderwatch/state"
)

// TestANewSessionReachesTheGroupBeforeItsFirstCall: the active a logs in
// again inside a sweep (its token expired or was refused) and saves the
// new session's sealed copy, as the client does before its first call
// with it; a is killed before the sweep ends, so no checkpoint carries
// the new session (a long first sync writes none for minutes). b, taking
// over, must go on with a's new session: the service keeps a session for
// a day and allows only 3, so each login a successor makes for want of
// it is one more towards the limit. Before, the sealed session reached
// the group only with the next checkpoint.
func TestANewSessionReachesTheGroupBeforeItsFirstCall(t *testing.T) {
	g, a, b, _ := activeAndStandby(t)
	const box = "bmV3LXNlc3Npb24=" // what only the new session's record holds
	saveSealed(t, a, box)
	a.kill() // inside the sweep: no Swept, no checkpoint
	g.takesOverWithSession(b, box)
}

// activeAndStandby is a group with a active (a checkpoint of its
// watermark wm written, CheckpointEvery 1 h) and b mirroring.
func activeAndStandby(t *testing.T) (g *group, a, b *member, wm time.Time) {
	g = newGroup(t)
	g.configure = func(_ string, c *replica.Config) { c.CheckpointEvery = time.Hour }
	wm = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	a = g.activeWithCheckpoint(&pipeline{}, wm)
	b = g.start("b", &pipeline{})
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })
	return g, a, b, wm
}

// saveSealed saves a sealed session whose box is box, as a's client does
// after a login (through Records).
func saveSealed(t *testing.T, a *member, box string) {
	t.Helper()
	if err := a.rep.Records(a.store).SaveRecord(plenty.SealedSessionRecord, map[string]any{"v": 1, "box": box}); err != nil {
		t.Fatal(err)
	}
}

// takesOverWithSession waits for b to be active and checks that it holds
// the sealed session box.
func (g *group) takesOverWithSession(b *member, box string) {
	g.t.Helper()
	waitFor(g.t, "b active", b.working)
	var sealed struct{ Box string }
	if found, err := b.store.LoadRecord(plenty.SealedSessionRecord, &sealed); !found || err != nil || sealed.Box != box {
		g.t.Errorf("b took over with the sealed session %q (found %v, %v), want %q", sealed.Box, found, err, box)
	}
}

// TestACheckpointBucketDeletedDuringAWaitIsWrittenAgain: the group's
// checkpoint bucket is deleted (an operator, a NATS data loss) while the
// active a makes no sweep and saves nothing (a wait the service asked
// for: a 429's Retry-After, a spent daily quota). a, whose session is
// live in its state file, writes the group's checkpoint and limits again
// from its own records within CheckpointEvery; b, taking over after a's
// kill, goes on with a's session. Before, nothing was written until a's
// next sweep, and b took over without the session (a login more).
func TestACheckpointBucketDeletedDuringAWaitIsWrittenAgain(t *testing.T) {
	g := newGroup(t)
	g.configure = func(_ string, c *replica.Config) { c.CheckpointEvery = time.Second }
	wm := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	a := g.activeWithCheckpoint(&pipeline{}, wm)
	const box = "c2Vzc2lvbg=="
	saveSealed(t, a, box)
	g.advance(a, wm.Add(time.Minute))
	if err := g.js.DeleteKeyValue(t.Context(), g.bucket+"_checkpoint"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the group's checkpoint and limits written again with a's session", func() bool {
		cp, ok := g.checkpoint()
		kv, err := g.js.KeyValue(t.Context(), g.bucket+"_checkpoint")
		if !ok || err != nil || !strings.Contains(string(cp.State), box) {
			return false
		}
		e, err := kv.Get(t.Context(), g.key+".limits")
		return err == nil && strings.Contains(string(e.Value()), box)
	})
	b := g.start("b", &pipeline{})
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })
	a.kill()
	g.takesOverWithSession(b, box)
}

// TestANewSessionReachesTheGroupWithoutAnEvent: the active a logs in
// again inside a steady sweep (its token expired or was refused) and
// saves the new session's sealed copy (through Records, as the client
// does); the sweep adds no event. The group's limits carry the sealed
// session at once, and its checkpoint too (Limit.Checkpointed: a merge
// cannot tell which of two sealed sessions is the later): it must reach
// the group's checkpoint after that sweep, not CheckpointEvery later (1 h here: a kill
// -9 of a inside that window hands b the session before, and b logs in
// once more, a session more towards the shop's limit). Then a dies and
// b, taking over, has the new session.
func TestANewSessionReachesTheGroupWithoutAnEvent(t *testing.T) {
	g, a, b, wm := activeAndStandby(t)
	const box = "bmV3LXNlc3Npb24=" // what only the new session's record holds
	saveSealed(t, a, box)
	wm = wm.Add(time.Minute)
	if err := a.store.Commit(state.Commit{Watermark: &wm}); err != nil {
		t.Fatal(err)
	}
	a.rep.Swept()
	waitFor(t, "the new sealed session in the group's checkpoint", func() bool {
		cp, ok := g.checkpoint()
		return ok && strings.Contains(string(cp.State), box)
	})
	a.kill()
	g.takesOverWithSession(b, box)
}

package replica_test

import (
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/replica"
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
	g := newGroup(t)
	g.configure = func(_ string, c *replica.Config) { c.CheckpointEvery = time.Hour }
	wm := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	a := g.activeWithCheckpoint(&pipeline{}, wm)
	b := g.start("b", &pipeline{})
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })

	const box = "bmV3LXNlc3Npb24=" // what only the new session's record holds
	if err := a.rep.Records(a.store).SaveRecord(plenty.SealedSessionRecord, map[string]any{"v": 1, "box": box}); err != nil {
		t.Fatal(err)
	}
	a.kill() // inside the sweep: no Swept, no checkpoint
	waitFor(t, "b active", b.working)
	var sealed struct{ Box string }
	if found, err := b.store.LoadRecord(plenty.SealedSessionRecord, &sealed); !found || err != nil || sealed.Box != box {
		t.Errorf("b took over with the sealed session %q (found %v, %v), want a's new one %q", sealed.Box, found, err, box)
	}
}

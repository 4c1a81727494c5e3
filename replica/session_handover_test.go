package replica_test

import (
	"strings"
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
	if err := a.rep.Records(a.store).SaveRecord(plenty.SealedSessionRecord, map[string]any{"v": 1, "box": box}); err != nil {
		t.Fatal(err)
	}
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
	waitFor(t, "b active", b.working)
	var sealed struct{ Box string }
	if found, err := b.store.LoadRecord(plenty.SealedSessionRecord, &sealed); !found || err != nil || sealed.Box != box {
		t.Errorf("b took over with the sealed session %q (found %v, %v), want a's %q", sealed.Box, found, err, box)
	}
}

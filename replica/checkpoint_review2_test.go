package replica_test

import (
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/replica"
)

// TestACheckpointBucketCreatedAgainGetsACheckpointAtTheNextSweep: the
// group's checkpoint bucket is deleted (an operator, a NATS data loss)
// under the active a and created again by its next write (the budget's,
// saved through Records in every sweep); the sweep adds no event. The
// group must have a checkpoint again after that sweep, not
// CheckpointEvery later (1 h here): a member that takes the shop over
// meanwhile starts without the group's watermark, baseline and sealed
// session (docs/fleet.md, Known limits: one sweep, before 26bfcb7).
func TestACheckpointBucketCreatedAgainGetsACheckpointAtTheNextSweep(t *testing.T) {
	g := newGroup(t)
	g.configure = func(_ string, c *replica.Config) { c.CheckpointEvery = time.Hour }
	wm := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	a := g.activeWithCheckpoint(&pipeline{}, wm)
	if err := g.js.DeleteKeyValue(t.Context(), g.bucket+"_checkpoint"); err != nil {
		t.Fatal(err)
	}
	budget := poller.BudgetState{Level: 100, At: time.Now(), Limit: 166000}
	if err := a.rep.Records(a.store).SaveRecord(poller.BudgetRecord, budget); err != nil {
		t.Fatal(err)
	}
	g.advance(a, wm.Add(time.Minute)) // the group's checkpoint again, of the sweep's watermark
}

package pipeline

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/replica"
)

// TestCheckpointBucketDeletedInALongSweepCostsNoLogin: the group's
// checkpoint bucket is deleted while the active r0 is inside a sweep
// that does not end (a search the service holds: no call ends, nothing
// is saved, no checkpoint is due). r0's session is live in its state
// file: it writes the group's checkpoint and limits again from it, and
// r1, taking over after r0's kill, goes on with that session: one login
// in all. Before, nothing was written again until r0's sweep ended, and
// r1 took over without the session (no checkpoint): a second login.
func TestCheckpointBucketDeletedInALongSweepCostsNoLogin(t *testing.T) {
	sim, srvURL, url, sweeps := restingShop(t)
	start := func(name string) *replicaRun {
		return runReplicaWith(t, testConfig(t, srvURL, url), name, replica.Tuning{CheckpointEvery: time.Second})
	}
	r0 := start("r0")
	testnats.WaitFor(t, "r0 active", 60*time.Second, r0.w.Working)
	sweeps("r0", 3)
	r1 := start("r1")
	testnats.WaitFor(t, "r1 a standby", 60*time.Second, func() bool { return r1.w.rep.Report().Holder != "" })

	var held, holding atomic.Bool
	release := make(chan struct{})
	holding.Store(true)
	sim.SetBeforeSearch(func(r *http.Request, _ int) {
		if holding.Load() {
			held.Store(true)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	})
	testnats.WaitFor(t, "r0's search held", 60*time.Second, held.Load)
	js := testnats.JetStream(t, url)
	if err := js.DeleteKeyValue(t.Context(), "orderwatch_checkpoint"); err != nil {
		t.Fatal(err)
	}
	key := r0.w.rep.Key()
	testnats.WaitFor(t, "the group's checkpoint written again", 60*time.Second, func() bool {
		kv, err := js.KeyValue(t.Context(), "orderwatch_checkpoint")
		if err != nil {
			return false
		}
		_, err = kv.Get(t.Context(), key)
		return err == nil
	})
	r0.kill()
	holding.Store(false)
	close(release)
	testnats.WaitFor(t, "r1 active", 60*time.Second, r1.w.Working)
	sweeps("r1", 2)
	if s := sim.Stats(); s.LoginCalls != 1 || s.SessionLimit429 != 0 {
		t.Errorf("after the deletion and r1's takeover: %d logins, %d session-limit 429s; want 1 and 0 (r1 goes on with r0's session)", s.LoginCalls, s.SessionLimit429)
	}
}
